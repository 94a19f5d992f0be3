package claims

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/MicahParks/jwkset"
)

// generation counts the key sets a keySource has installed that differed
// from the one before. The token cache records it before a verification
// starts and serves a hit only while it is unchanged, so a key that is
// retired or rotated away stops verifying cached tokens at the same moment
// it stops verifying fresh ones.
func (k *keySource) generation() uint64 { return k.gen.Load() }

// noteKeys is called by install after the store holds keys. When their
// public material differs from the previous set it bumps the generation
// (after the store was replaced: whoever reads the new generation
// verifies against the new keys) and tells the token cache to purge.
// A periodic refresh that returns the same keys changes nothing, so the
// cache survives it.
func (k *keySource) noteKeys(keys []jwkset.JWK) {
	h := sha256.New()
	unsure := false
	for _, j := range keys {
		// The public JWK (Private: false when parsed) with its kid, alg and
		// use: any change to what a key verifies, or under which kid,
		// changes the fingerprint.
		b, err := json.Marshal(j.Marshal())
		if err != nil {
			unsure = true // cannot happen for parsed keys; if it does, count the set as new
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	var fp [sha256.Size]byte
	h.Sum(fp[:0])
	k.fpMu.Lock()
	changed := unsure || !k.hasFP || fp != k.fp
	k.fp, k.hasFP = fp, true
	if changed {
		k.gen.Add(1)
	}
	onChange := k.onChange
	k.fpMu.Unlock()
	if changed && onChange != nil {
		onChange()
	}
}
