package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
)

// Defaults for Options fields left zero.
const (
	DefaultCallTimeout     = 30 * time.Second
	DefaultMaxRequestBytes = 1 << 20
)

// ErrConfig is wrapped by every error New returns for a bad Options.
var ErrConfig = errors.New("server: invalid configuration")

// Options configures a Server.
type Options struct {
	// Name and Version identify the server to clients.
	Name    string
	Version string
	// Instructions are sent to clients on initialize.
	Instructions string

	// Verifier verifies bearer tokens and mints the scope of each call.
	// Required.
	Verifier *claims.Verifier
	// DB is handed to every tool handler. Required.
	DB *guardedsql.DB
	// Redactor serializes every result, error message and audit field.
	// Nil means redact's default policy: every PII category redacted.
	Redactor *redact.Redactor

	// Levels are the scope level names of the application (for example
	// "chain", "hotel"). Each level and "<level>_id" is forbidden as a tool
	// input property, in addition to DefaultScopeKeys and ScopeKeys. Empty
	// means the levels of DB's schema, which is where they are declared;
	// if set, they must be the schema's (see ErrLevels).
	Levels []string
	// ScopeKeys are further property names no tool input may carry.
	ScopeKeys []string

	// AuditLogger receives one record per tool call. Nil means
	// slog.Default(). Its fields are already redacted.
	AuditLogger *slog.Logger
	// Logger receives operational messages (internal errors with their
	// correlation id). Nil means slog.Default(). Messages are redacted.
	Logger *slog.Logger

	// CallTimeout bounds one tool call; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxRequestBytes bounds an HTTP request body; zero means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// ListTTL is the cache hint (ttlMs) of list results, by method
	// ("tools/list", "prompts/list", "resources/list",
	// "resources/templates/list"); zero for a method not named. A list is
	// filtered by the caller's Require, so it is always cacheScope
	// "private": no shared cache may serve it to another caller.
	ListTTL map[string]time.Duration

	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time

	// Tracer, if set, observes every tool call and limit refusal, for
	// metrics and traces (package server/otelserver provides one). Nil
	// records nothing.
	Tracer Tracer
	// LogLimit bounds how many Warn and Error records of one kind Logger
	// receives per interval (see LogLimit); the zero value applies the
	// defaults.
	LogLimit LogLimit

	// Limits bound each tenant's and each subject's calls (concurrency and
	// rate), so that one tenant cannot starve the others; the zero value
	// sets no limit. See Limits and LimitError.
	Limits Limits

	// MaxTokenLifetime, if positive, refuses a token whose expiry lies
	// further than this in the future (when it is presented), on both
	// transports: a token minted to live for decades is not accepted
	// just because it verifies. Zero accepts any exp.
	MaxTokenLifetime time.Duration

	// Flow, if set, enforces an information-flow policy (package flow):
	// every successful result is labelled into the caller's taint before
	// the client receives it, and a call to a tool declared a sink
	// (Tool.Flow.Sink) is judged before its handler runs and denied with
	// a witness (a DenyError whose Rule is one of flow's Rule* names).
	Flow *flow.Checker
	// ConsentTimeout bounds how long the user may take to answer a
	// declassification request or an Input: the requestState expires this
	// long after it is issued, and a later answer is refused. Zero means
	// DefaultConsentTimeout, negative is refused.
	ConsentTimeout time.Duration
	// Input configures multi round-trip requests (consent and Input): the
	// keys that sign requestState and the store that spends each once.
	// Replicas behind one endpoint must share both.
	Input InputOptions
}

// Server is a tenant-scoped MCP tool server. Create it with New, add tools
// with AddTool, then serve it with Handler, ListenAndServe or RunStdio.
type Server struct {
	opts      Options
	mcp       *mcp.Server
	forbidden map[string]string

	mu    sync.Mutex
	tools map[string]bool

	// surface: resources, prompts, completions, requirements and
	// subscriptions (resource.go, prompt.go, complete.go, require.go).
	surface surfaceState

	// limiter admits calls against Options.Limits; sessions counts
	// stateful sessions per subject; inflight counts requests in the
	// pipeline (limits.go, httpserver.go, pipeline.go).
	limiter  *limiter
	sessions sessionCounter
	inflight atomic.Int64

	// keys and replays sign and spend requestState (mrtr.go).
	keys    [][]byte
	replays ReplayStore

	// idem: tools/call accepts idempotency keys (idempotency.go).
	idem atomic.Bool
}

// New validates opts and returns a Server with no tools.
func New(opts Options) (*Server, error) {
	if opts.Verifier == nil {
		return nil, fmt.Errorf("%w: Verifier is required (scope comes only from verified tokens)", ErrConfig)
	}
	if opts.DB == nil {
		return nil, fmt.Errorf("%w: DB is required", ErrConfig)
	}
	if opts.Name == "" {
		return nil, fmt.Errorf("%w: Name is required", ErrConfig)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.AuditLogger == nil {
		opts.AuditLogger = slog.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// One outage must not flood the log: see LogLimit.
	opts.Logger = slog.New(newLimitedHandler(opts.Logger.Handler(), opts.LogLimit, opts.Now))
	if opts.CallTimeout < 0 || opts.MaxRequestBytes < 0 || opts.MaxTokenLifetime < 0 || opts.ConsentTimeout < 0 || opts.LogLimit.Interval < 0 {
		return nil, fmt.Errorf("%w: CallTimeout, MaxRequestBytes, MaxTokenLifetime, ConsentTimeout and LogLimit.Interval must not be negative", ErrConfig)
	}
	if err := checkListTTL(opts.ListTTL); err != nil {
		return nil, err
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.ConsentTimeout <= 0 {
		opts.ConsentTimeout = DefaultConsentTimeout
	}
	if tr := opts.Tracer; tr != nil {
		user := opts.Limits.OnReject
		opts.Limits.OnReject = func(ctx context.Context, e *LimitError) {
			tr.TraceLimit(ctx, e)
			if user != nil {
				user(ctx, e)
			}
		}
	}
	keys, err := opts.Input.keys()
	if err != nil {
		return nil, err
	}
	replays := opts.Input.Replays
	if replays == nil {
		replays = &memReplays{spent: map[string]time.Time{}, now: opts.Now}
	}
	if err := resolveLevels(&opts); err != nil {
		return nil, err
	}
	lim, err := newLimiter(opts.Limits, opts.Levels)
	if err != nil {
		return nil, err
	}
	lim.log = opts.Logger // the rate store's outage warning (limits.go)
	s := &Server{
		opts:      opts,
		forbidden: forbiddenKeys(opts.ScopeKeys, opts.Levels),
		tools:     map[string]bool{},
		limiter:   lim,
		keys:      keys,
		replays:   replays,
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       hideSessionIDs(opts.Logger),
		// Tools are listed (with list-changed notifications) even before
		// the first AddTool. Logging is the go-sdk's historical default,
		// kept while clients of protocol versions before 2026-07-28 use it.
		// Resources, prompts and completions: see resource.go, prompt.go
		// and complete.go. Subscribing to any URI succeeds; what a
		// subscription receives is filtered per subscriber.
		Capabilities: &mcp.ServerCapabilities{
			//lint:ignore SA1019 deprecated in 2026-07-28, still spoken by older clients
			Logging:   &mcp.LoggingCapabilities{},
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		},
		CompletionHandler:  s.complete,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		SetCacheable:       s.cacheable,
	})
	s.mcp.AddReceivingMiddleware(s.pipeline)
	s.mcp.AddSendingMiddleware(s.filterNotifications)
	return s, nil
}

// Tool describes a tool to AddTool. The input and output schemas are
// inferred from the handler's types; a `jsonschema:"…"` struct tag on a
// field becomes its description.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Annotations are hints for clients (read-only, destructive, …).
	Annotations *mcp.ToolAnnotations
	// Require restricts who may list and call the tool (roles, OAuth
	// scopes); it is checked on every call, before the handler.
	Require Require
	// Flow declares the information-flow label of the tool's results and
	// whether it is a sink (see package flow). A sink cannot be registered
	// on a server without Options.Flow: its calls could not be checked.
	Flow flow.Decl
	// Narrowable lets the caller narrow a call to one of the grants of its
	// token: the input gains the optional property NarrowProperty
	// ("within"), a grant written "level:id" ("company:4"), which the
	// server checks against the verified token before the handler runs
	// and removes from the arguments; the handler's context then carries
	// the scope of that one grant. A selector naming none of the caller's
	// grants is refused like a missing row. See the package documentation.
	Narrowable bool
}

// ToolHandler is a tool's code. ctx carries the caller's scope (see
// scope.FromContext) and the call's deadline; db adds the tenant predicates
// to every statement. The result is sent as redacted structured content
// and its text, or, if Out is Content, as its blocks (redacted, with no
// output schema). Return the result, or an error: guardedsql.ErrNotFound
// for "no such row (for you)", an error from InvalidInput for a message the
// caller should see, anything else for an internal failure.
type ToolHandler[In, Out any] func(ctx context.Context, db *guardedsql.DB, in In) (Out, error)

// AddTool registers a typed tool on s. It fails, and registers nothing, if
// the tool name is empty or taken, if In is not a struct (or map), if the
// schemas cannot be inferred, or if the input schema names a scope key
// (*TenantInputError, matching ErrTenantInInput).
func AddTool[In, Out any](s *Server, t Tool, h ToolHandler[In, Out]) error {
	if t.Name == "" {
		return fmt.Errorf("%w: tool with no name", ErrConfig)
	}
	if h == nil {
		return fmt.Errorf("%w: tool %q has a nil handler", ErrConfig, t.Name)
	}
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return fmt.Errorf("%w: tool %q: input schema: %v", ErrConfig, t.Name, err)
	}
	if in.Type != "object" {
		return fmt.Errorf("%w: tool %q: input must be a struct or map (schema type %q)", ErrConfig, t.Name, in.Type)
	}
	if err := checkTenantFree(t.Name, in, s.forbidden); err != nil {
		return err
	}
	if t.Narrowable {
		if err := addNarrowProperty(t.Name, in); err != nil {
			return err
		}
	}
	inResolved, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return fmt.Errorf("%w: tool %q: input schema: %v", ErrConfig, t.Name, err)
	}
	var out any // none for Content: its blocks are not structured content
	if reflect.TypeFor[Out]() != reflect.TypeFor[Content]() {
		out, err = outputSchema[Out]()
	}
	if err != nil {
		return fmt.Errorf("%w: tool %q: output schema: %v", ErrConfig, t.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools[t.Name] {
		return fmt.Errorf("%w: tool %q registered twice", ErrConfig, t.Name)
	}
	var ft *flow.Tool
	if s.opts.Flow != nil {
		if ft, err = s.opts.Flow.Register(t.Name, reflect.TypeFor[In](), reflect.TypeFor[Out](), t.Flow); err != nil {
			return fmt.Errorf("%w: tool %q: %w", ErrConfig, t.Name, err)
		}
	} else if t.Flow.Sink != nil {
		return fmt.Errorf("%w: tool %q is declared a sink but Options.Flow is nil, so its calls could not be checked", ErrConfig, t.Name)
	}
	tool := &mcp.Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		Annotations:  t.Annotations,
		InputSchema:  in,
		OutputSchema: out,
	}
	// Known to the pipeline before the go-sdk can dispatch to it. The
	// go-sdk panics on schemas it rejects; that becomes an error.
	s.tools[t.Name] = true
	s.setRequireLocked(kindTool, t.Name, t.Require)
	_, err = safely(func() (any, error) {
		s.mcp.AddTool(tool, s.toolHandler(t.Narrowable, inputSchema{resolved: inResolved, check: compileArgCheck(in)}, ft, typedCall(h)))
		return nil, nil
	})
	if err != nil {
		delete(s.tools, t.Name)
		delete(s.surface.requires, kindTool+"\x00"+t.Name)
		return fmt.Errorf("%w: tool %q: %v", ErrConfig, t.Name, err)
	}
	return nil
}

// MCP returns the underlying go-sdk server, for transports this package
// does not offer. Tools must still be added with AddTool.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// AuditLogger returns the audit log of Options.AuditLogger (slog.Default
// if that was nil), for records that belong beside the tool calls', such
// as the egress guard's denials (egress.Guard.Audit).
func (s *Server) AuditLogger() *slog.Logger { return s.opts.AuditLogger }

func newCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
