package conformance

import "testing"

// intTypeMax reads the catalog spellings of the three engines.
func TestIntTypeMax(t *testing.T) {
	for typ, want := range map[string]int64{
		"tinyint(3) unsigned": 255, "tinyint(4)": 127, "smallint(5) unsigned": 65535, "smallint": 32767,
		"mediumint(8) unsigned": 16777215, "int(11)": 2147483647, "int(10) unsigned": 4294967295, "integer": 2147483647,
		"bigint": 0, "bigint(20) unsigned": 0, "interval": 0, "point": 0, "text": 0,
	} {
		got, ok := intTypeMax(typ)
		if ok != (want != 0) || got != want {
			t.Errorf("intTypeMax(%q) = %d, %v; want %d", typ, got, ok, want)
		}
	}
}
