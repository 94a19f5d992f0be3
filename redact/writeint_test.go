package redact

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestWriteInt checks writeInt against strconv at the digit-count
// boundaries, the extremes and random values, appended after other bytes.
func TestWriteInt(t *testing.T) {
	vals := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p+1, -p, -p-1, 10*p-1)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		vals = append(vals, int64(rng.Uint64()), rng.Int64N(1000000), -rng.Int64N(1000000))
	}
	e := &encodeState{}
	for _, v := range vals {
		e.buf = append(e.buf[:0], "x:"...)
		e.writeInt(v)
		if got, want := string(e.buf), "x:"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("writeInt(%d) wrote %q, want %q", v, got, want)
		}
	}
}
