package server

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Idempotency keys (issue 29 §2). A client that sends a key with a
// tools/call may retry the call after any error, as often as it likes: the
// write it asks for is made at most once.
//
//   - The key travels in the request's _meta as MetaIdempotencyKey, or in
//     the HTTP header HeaderIdempotencyKey (the _meta value wins). It is
//     16 to 255 printable ASCII characters; use a fresh random value (a
//     UUIDv4) per logical operation: it is also the secret the stored
//     result is encrypted with.
//   - The key is bound to the caller (subject and grants, after narrowing),
//     the tool and the arguments (canonical JSON). The same key from another
//     caller or for another tool is another key; the same key with other
//     arguments is refused with invalid params (-32602).
//   - It is recorded in guardedsql.IdempotencyTable inside the tool's own
//     first write transaction (guardedsql.WithCallWrites): recorded if and
//     only if that write commits. A call that makes no write records
//     nothing and may simply run again.
//   - After the handler returns, its result is stored with the key,
//     encrypted (AES-GCM) under a key derived from the client's key, which
//     is never stored: raw SQL on the table reveals no result.
//   - A retry with a recorded key does not run the handler: it gets the
//     stored result, whose flow label is recorded into the caller's taint
//     again before release (failing closed), or, if no result was stored,
//     the write.unconfirmed error (CodeWriteUnconfirmed) with retry_safe.

// MetaIdempotencyKey is the _meta key of a tools/call's idempotency key.
const MetaIdempotencyKey = "io.tenantmcp/idempotency-key"

// HeaderIdempotencyKey is the HTTP header that may carry it instead.
const HeaderIdempotencyKey = "Idempotency-Key"

// CodeWriteUnconfirmed is the JSON-RPC error code of a call whose write
// was committed but whose result is withheld: the taint of the result
// could not be recorded (the flow store failed), the result could not be
// encoded, or a retry found the key recorded without a stored result. The
// message is "write.unconfirmed: the write was applied; its result is
// withheld" and the data {"rule": "write.unconfirmed", "write_applied":
// true, "retry_safe": <the call carried an idempotency key>, "call_id"}.
// With retry_safe the client retries with the same key (and gets the
// result once the flow store answers); without it a retry makes the write
// again.
const CodeWriteUnconfirmed = -32036

// RuleWriteUnconfirmed names that error in its data and the audit record.
const RuleWriteUnconfirmed = "write.unconfirmed"

// OutcomeUnconfirmed is its audit and metrics outcome.
const OutcomeUnconfirmed = "write_unconfirmed"

// maxStoredResult bounds the result stored with a key; a larger one is
// not stored (a retry gets write.unconfirmed).
const maxStoredResult = 1 << 20

type unconfirmedData struct {
	Rule         string `json:"rule"`
	WriteApplied bool   `json:"write_applied"`
	RetrySafe    bool   `json:"retry_safe"`
	CallID       string `json:"call_id"`
}

// EnableIdempotencyKeys makes the server accept idempotency keys on
// tools/call, after checking that the options' DB can read its
// guardedsql.IdempotencyTable (create it with guardedsql.IdempotencyDDL).
// Without it a call carrying a key is refused with invalid params: the
// client must not believe a retry safe when it is not.
func (s *Server) EnableIdempotencyKeys(ctx context.Context) error {
	if err := s.opts.DB.CheckIdempotency(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.idem.Store(true)
	return nil
}

// idemKey is a call's idempotency key, bound.
type idemKey struct {
	claim guardedsql.IdempotencyClaim
	aead  cipher.AEAD
}

// errBadKey: a key the server refuses (invalid params).
type errBadKey string

func (e errBadKey) Error() string { return string(e) }

// idempotencyKey reads the call's key and binds it to the caller sc, the
// tool and args; nil without a key.
func (s *Server) idempotencyKey(rq *request, sc scope.Scope, args json.RawMessage) (*idemKey, error) {
	raw, ok := rq.meta[MetaIdempotencyKey]
	var key string
	switch {
	case ok:
		if key, ok = raw.(string); !ok {
			return nil, errBadKey("the idempotency key must be a string")
		}
	case rq.header != nil && rq.header.Get(HeaderIdempotencyKey) != "":
		key = rq.header.Get(HeaderIdempotencyKey)
	default:
		return nil, nil
	}
	if len(key) < 16 || len(key) > 255 || !printableASCII(key) {
		return nil, errBadKey("the idempotency key must be 16 to 255 printable ASCII characters")
	}
	if !s.idem.Load() {
		return nil, errBadKey("this server does not accept idempotency keys")
	}
	canon, err := canonicalJSON(args)
	if err != nil {
		return nil, errBadKey("arguments must be a JSON object")
	}
	grants := make([]string, 0, len(sc.Grants()))
	for _, g := range sc.Grants() {
		grants = append(grants, g.String())
	}
	slices.Sort(grants)
	// Length-prefixed fields: no two bindings share an encoding.
	var b bytes.Buffer
	for _, f := range append([]string{"tenantmcp idempotency v1", rq.name, sc.Subject(), key}, grants...) {
		fmt.Fprintf(&b, "%d:%s;", len(f), f)
	}
	id := sha256.Sum256(append([]byte("id\x00"), b.Bytes()...))
	enc := sha256.Sum256(append([]byte("enc\x00"), b.Bytes()...))
	argsSum := sha256.Sum256(canon)
	blk, err := aes.NewCipher(enc[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &idemKey{claim: guardedsql.IdempotencyClaim{ID: hex.EncodeToString(id[:]), Args: hex.EncodeToString(argsSum[:]),
		CreatedAt: s.opts.Now().UnixMilli()}, aead: aead}, nil
}

func printableASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// canonicalJSON re-encodes args with sorted keys and numbers as written,
// so that a retry's arguments match whatever their spacing or key order.
func canonicalJSON(args json.RawMessage) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// seal encrypts a result for storage, bound to the key's row.
func (k *idemKey) seal(plain []byte) string {
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, []byte(k.claim.ID)))
}

// open decrypts a stored result.
func (k *idemKey) open(stored string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(stored)
	if err != nil || len(b) < k.aead.NonceSize() {
		return nil, errors.New("stored result is malformed")
	}
	n := k.aead.NonceSize()
	return k.aead.Open(nil, b[:n], b[n:], []byte(k.claim.ID))
}

// storeResult stores out with the key whose row the call's write
// recorded. A failure is logged and not fatal: the result is still
// answered; a retry then gets write.unconfirmed.
func (s *Server) storeResult(ctx context.Context, rq *request, k *idemKey, out any) {
	js, err := json.Marshal(out)
	if err == nil && len(js) > maxStoredResult {
		err = fmt.Errorf("result of %d bytes is larger than %d", len(js), maxStoredResult)
	}
	if err == nil {
		err = s.opts.DB.StoreIdempotencyResult(context.WithoutCancel(ctx), k.claim.ID, k.seal(js))
	}
	if err != nil {
		s.opts.Logger.Warn("idempotency: result not stored; a retry will get write.unconfirmed",
			slog.String("tool", rq.name), slog.String("call_id", rq.callID),
			slog.String("error", s.logRedactor().Error(err)))
	}
}

// unconfirmed answers a call whose write was committed and whose result
// is withheld (see CodeWriteUnconfirmed); err, if any, is logged.
func (s *Server) unconfirmed(rq *request, retrySafe bool, err error) error {
	if guardfault.Off(guardfault.WriteUnconfirmed) {
		rq.outcome = OutcomeError
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	rq.outcome, rq.rule = OutcomeUnconfirmed, RuleWriteUnconfirmed
	if err != nil {
		s.opts.Logger.Error("tool call: write applied, result withheld",
			slog.String("tool", rq.name), slog.String("call_id", rq.callID),
			slog.Bool("retry_safe", retrySafe), slog.String("error", s.logRedactor().Error(err)))
	}
	data, _ := json.Marshal(unconfirmedData{Rule: RuleWriteUnconfirmed, WriteApplied: true, RetrySafe: retrySafe, CallID: rq.callID})
	return &jsonrpc.Error{Code: CodeWriteUnconfirmed, Message: "write.unconfirmed: the write was applied; its result is withheld", Data: json.RawMessage(data)}
}

// badKey refuses a call's key with invalid params.
func badKey(rq *request, msg string) error {
	rq.outcome = OutcomeInvalid
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + msg}
}
