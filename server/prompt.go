package server

import (
	"context"
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
)

// Prompt describes a prompt to AddPrompt.
type Prompt struct {
	Name        string
	Title       string
	Description string
	Args        []PromptArg
	Require     Require
	Flow        flow.Decl
}

// PromptArg is one argument of a prompt. Its name obeys the tool-input
// rule: no scope key.
type PromptArg struct {
	Name        string
	Title       string
	Description string
	Required    bool
	// Complete, if set, offers completions for the argument.
	Complete *Completion
}

// PromptHandler renders a prompt. It returns the instruction text and
// the data the prompt carries; the server sends one user message made of
// the text (through the redactor's detectors) followed by the redacted
// JSON of data, so pii tags on data's fields apply as they do to a tool's
// result. Return guardedsql.ErrNotFound when an argument names nothing
// the caller can see, or an InvalidInput error.
type PromptHandler[Data any] func(ctx context.Context, db *guardedsql.DB, args map[string]string) (text string, data Data, err error)

type promptEntry struct {
	p      Prompt
	render func(ctx context.Context, db *guardedsql.DB, args map[string]string) (string, any, error)
	ft     *flow.Tool
}

// AddPrompt registers a prompt. Getting it follows the path of a tool
// call: scope from the request's verified token, Require, the guarded DB,
// redaction, flow label, one audit record.
func AddPrompt[Data any](s *Server, p Prompt, h PromptHandler[Data]) error {
	if p.Name == "" || h == nil {
		return fmt.Errorf("%w: a prompt needs a name and a handler", ErrConfig)
	}
	if p.Flow.Sink != nil {
		return fmt.Errorf("%w: prompt %q: a prompt cannot be a sink", ErrConfig, p.Name)
	}
	margs := make([]*mcp.PromptArgument, 0, len(p.Args))
	for _, a := range p.Args {
		if k, bad := s.forbidden[normalizeKey(a.Name)]; bad {
			return &TenantInputError{Tool: p.Name, Property: "/" + a.Name, Key: k}
		}
		margs = append(margs, &mcp.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
	}
	e := &promptEntry{p: p, render: func(ctx context.Context, db *guardedsql.DB, args map[string]string) (string, any, error) {
		return h(ctx, db, args)
	}}
	s.mu.Lock()
	_, dup := s.surface.prompts[p.Name]
	s.mu.Unlock()
	if dup {
		return fmt.Errorf("%w: prompt %q registered twice", ErrConfig, p.Name)
	}
	if s.opts.Flow != nil {
		ft, err := s.opts.Flow.Register("prompt:"+p.Name, reflect.TypeFor[struct{}](), reflect.TypeFor[Data](), p.Flow)
		if err != nil {
			return fmt.Errorf("%w: prompt %q: %w", ErrConfig, p.Name, err)
		}
		e.ft = ft
	}
	s.mcp.AddPrompt(&mcp.Prompt{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: margs}, s.promptHandler(e))
	s.mu.Lock()
	if s.surface.prompts == nil {
		s.surface.prompts = map[string]*promptEntry{}
	}
	s.surface.prompts[p.Name] = e
	s.mu.Unlock()
	s.setRequire(kindPrompt, p.Name, p.Require)
	return nil
}

func (s *Server) promptHandler(e *promptEntry) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return audited(s, ctx, req.Extra, "prompts/get", e.p.Name, func(a *auditRecord, red *redact.Scoped, c caller) (*mcp.GetPromptResult, error) {
			return s.getPrompt(ctx, a, red, c, e, req)
		})
	}
}

func (s *Server) getPrompt(ctx context.Context, a *auditRecord, red *redact.Scoped, c caller, e *promptEntry, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	if c.deny != nil {
		return nil, s.deny(a, red, c.deny)
	}
	if d := s.authorize(kindPrompt, e.p.Name, c); d != nil {
		return nil, s.deny(a, red, d)
	}
	args := req.Params.Arguments
	for _, pa := range e.p.Args {
		if pa.Required && args[pa.Name] == "" {
			a.outcome = OutcomeInvalid
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("argument %q is required", pa.Name)}
		}
	}
	for k := range args {
		if !containsArg(e.p.Args, k) {
			a.outcome = OutcomeInvalid
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: red.String(fmt.Sprintf("unknown argument %q", k))}
		}
	}
	ctx, fc, cancel := s.enter(ctx, a, c, e.ft, req.Session, req.Params.Meta, req.Extra)
	defer cancel()
	text, data, err := s.runPrompt(ctx, e, args)
	notFound := func() error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "not found"}
	}
	if err != nil {
		return nil, s.rpcError(ctx, a, red, err, notFound)
	}
	body := red.String(text)
	if data != nil && !reflect.ValueOf(data).IsZero() {
		js, err := red.JSON(data)
		if err != nil {
			return nil, s.rpcError(ctx, a, red, fmt.Errorf("redacting prompt data: %w", err), nil)
		}
		body += "\n\n```json\n" + string(js) + "\n```"
	}
	// A result whose label could not be recorded is withheld.
	if fc != nil {
		if err := fc.Record(ctx, data, red.Report()); err != nil {
			return nil, s.rpcError(ctx, a, red, fmt.Errorf("recording the flow label: %w", err), nil)
		}
	}
	a.outcome = OutcomeOK
	a.rows = countRows(data)
	return &mcp.GetPromptResult{
		Description: e.p.Description,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: body}}},
	}, nil
}

func containsArg(args []PromptArg, name string) bool {
	for _, a := range args {
		if a.Name == name {
			return true
		}
	}
	return false
}

func (s *Server) runPrompt(ctx context.Context, e *promptEntry, args map[string]string) (text string, data any, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, data, err = "", nil, fmt.Errorf("prompt handler panic: %v", r)
		}
	}()
	return e.render(ctx, s.opts.DB, args)
}
