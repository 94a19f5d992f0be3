package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// sharedCache is a cache in front of the server that honours the hints
// as a shared cache may: a result marked cacheScope "public" is kept under
// its method and params (_meta aside) and served to anyone who asks the
// same. (It ignores ttlMs, as a cache that keeps a public result longer
// is still right to share it.)
type sharedCache struct {
	next http.Handler
	mu   sync.Mutex
	kept map[string][]byte
	hits int
}

func (c *sharedCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	delete(m.Params, "_meta")
	p, _ := json.Marshal(m.Params)
	key := m.Method + " " + string(p)
	c.mu.Lock()
	hit, ok := c.kept[key]
	if ok {
		c.hits++
	}
	c.mu.Unlock()
	if ok {
		w.Header().Set("Content-Type", "application/json")
		w.Write(hit)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	if i := bytes.Index(out, []byte("data: ")); i >= 0 {
		out = out[i+6:]
		if j := bytes.IndexByte(out, '\n'); j >= 0 {
			out = out[:j]
		}
	}
	var res struct {
		Result struct {
			CacheScope string `json:"cacheScope"`
		} `json:"result"`
	}
	if json.Unmarshal(out, &res) == nil && res.Result.CacheScope == "public" {
		c.mu.Lock()
		c.kept[key] = bytes.Clone(out)
		c.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// TestSharedCacheNeverCrossesCallers: behind a shared cache that honours
// the cache hints, each caller gets exactly the lists and resource reads
// the server gives it directly: none is marked public (the go-sdk's
// default when unset), while server/discover, the same for all, is, and
// the configured ttlMs reach the wire.
func TestSharedCacheNeverCrossesCallers(t *testing.T) {
	for _, leak := range sharedCacheLeaks(t) {
		t.Error(leak)
	}
}

// TestSharedCacheCatchesPublicResults is the mutation check of the test
// above: with the private cache scope switched off, it must see leaks.
func TestSharedCacheCatchesPublicResults(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	defer guardfault.Disable(guardfault.PrivateCache)()
	if leaks := sharedCacheLeaks(t); len(leaks) == 0 {
		t.Fatal("results marked public, and the shared cache handed no caller another's answer")
	}
}

// sharedCacheLeaks serves two callers of different tenants and roles
// through a cache that keeps every public result, and returns each answer
// the cache gave ben that the server would not have.
func sharedCacheLeaks(t *testing.T) (leaks []string) {
	t.Helper()
	f := newFixture(t, func(o *server.Options) {
		o.ListTTL = map[string]time.Duration{"tools/list": time.Minute, "prompts/list": time.Minute, "resources/list": time.Minute, "resources/templates/list": time.Minute}
	})
	type who struct {
		Subject string `json:"subject"`
	}
	me := func(ctx context.Context, _ *guardedsql.DB, _ map[string]string) (who, error) {
		sc, _ := scope.FromContext(ctx)
		return who{sc.Subject()}, nil
	}
	manager := server.Require{Roles: []string{"manager"}}
	for _, err := range []error{
		server.AddTool(f.srv, server.Tool{Name: "report", Require: manager}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }),
		server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }),
		server.AddPrompt(f.srv, server.Prompt{Name: "brief", Require: manager}, func(context.Context, *guardedsql.DB, map[string]string) (string, empty, error) {
			return "x", empty{}, nil
		}),
		server.AddResource(f.srv, server.Resource{URI: "notes://me", Name: "me", TTL: time.Minute}, me),
		server.AddResource(f.srv, server.Resource{URI: "notes://board", Name: "board", Require: manager}, me),
		server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://team/{id}", Name: "team", Require: manager, TTL: time.Minute}, me),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	direct := httptest.NewServer(h)
	defer direct.Close()
	cache := &sharedCache{next: h, kept: map[string][]byte{}}
	cached := httptest.NewServer(cache)
	defer cached.Close()
	ann, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Roles: []string{"manager"}})
	ben, _ := f.issuer.Mint(devtoken.Token{Subject: "ben", Groups: []string{"org:south"}})
	for _, c := range []struct{ method, name, params string }{
		{"tools/list", "", ""}, {"prompts/list", "", ""}, {"resources/list", "", ""}, {"resources/templates/list", "", ""},
		{"resources/read", "notes://me", `"uri":"notes://me"`}, {"server/discover", "", ""},
	} {
		body, hdr := req2026(c.method, c.params), hdr2026(c.method, c.name)
		first := post(t, cached.URL+"/mcp", ann, body, hdr...)
		second := post(t, cached.URL+"/mcp", ben, body, hdr...)
		own := post(t, direct.URL+"/mcp", ben, body, hdr...)
		if second.status != http.StatusOK || len(own.msg.Result) == 0 || string(second.msg.Result) != string(own.msg.Result) {
			leaks = append(leaks, fmt.Sprintf("%s: ben got through the cache\n%s\nbut from the server\n%s", c.method, second.raw, own.raw))
		}
		if c.method != "server/discover" && string(first.msg.Result) == string(own.msg.Result) {
			t.Errorf("%s: ann's and ben's answers are equal: the case proves nothing", c.method)
		}
		if c.method != "server/discover" && !strings.Contains(string(own.msg.Result), `"ttlMs":60000`) {
			t.Errorf("%s: no ttlMs 60000: %s", c.method, own.raw)
		}
	}
	if !guardfault.Off(guardfault.PrivateCache) && cache.hits != 1 {
		t.Errorf("%d cache hits, want 1 (server/discover)", cache.hits)
	}
	return leaks
}
