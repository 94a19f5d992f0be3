package guardfault

// ScopeCacheKey: the encoded scope documents are cached under a key made
// of the schema's level list and the scope's canonical grants
// (guardedsql/internal/engine.EncodeScope). Switching it off drops the
// grants from the key, so the first tenant encoded for a schema is served
// to every later tenant of it; the read properties (P1 among them) must
// notice on every engine.
const ScopeCacheKey Fix = "scope_cache_key"

// RenderCacheKey: the guard's render cache (guardedsql/internal/guard,
// cache.go) keys a statement's text by the scope's active levels and
// shapes, among the rest. Switching it off leaves them out of the key, so
// a tenant can be served the text rendered for another grant shape;
// TestRenderCacheKeyMutation (TestRenderCacheIsolation's check) must
// notice.
const RenderCacheKey Fix = "render_cache_key"
