package server

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
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
// result. If Data is Content, the text (if not empty) is the first user
// message and each block is one more (redacted as a tool's Content is).
// Return guardedsql.ErrNotFound when an argument names nothing the caller
// can see, or an InvalidInput error.
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
	// Known to the pipeline before the go-sdk can dispatch to it.
	s.mu.Lock()
	if s.surface.prompts == nil {
		s.surface.prompts = map[string]*promptEntry{}
	}
	s.surface.prompts[p.Name] = e
	s.setRequireLocked(kindPrompt, p.Name, p.Require)
	s.mu.Unlock()
	s.mcp.AddPrompt(&mcp.Prompt{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: margs}, s.promptHandler(e))
	return nil
}

// promptHandler is a prompt's part of the pipeline: the arguments
// checked, its handler under the caller's scope, the text and data
// redacted and labelled.
func (s *Server) promptHandler(e *promptEntry) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		rq, args := requestOf(ctx), req.Params.Arguments
		rq.in.retry(req.Params.InputResponses, req.Params.RequestState)
		for _, pa := range e.p.Args {
			if pa.Required && args[pa.Name] == "" {
				rq.outcome = OutcomeInvalid
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("argument %q is required", pa.Name)}
			}
		}
		for k := range args {
			if !slices.ContainsFunc(e.p.Args, func(a PromptArg) bool { return a.Name == k }) {
				rq.outcome = OutcomeInvalid
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: rq.red.String(fmt.Sprintf("unknown argument %q", k))}
			}
		}
		ctx, fc, cancel, _ := s.enter(ctx, rq, rq.caller.scope, e.ft, json.RawMessage(`{}`)) // not a sink: never denied
		defer cancel()
		var text string
		data, err := safely(func() (data any, err error) {
			text, data, err = e.render(ctx, s.opts.DB, args)
			return data, err
		})
		if ir, werr, ok := s.mrtrAnswer(rq, err); ok {
			if werr != nil {
				return nil, werr
			}
			return &mcp.GetPromptResult{InputRequests: ir.reqs, RequestState: ir.state}, nil
		}
		if err != nil {
			return nil, s.rpcError(ctx, rq, err, func() error {
				return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "not found"}
			})
		}
		if c, ok := data.(Content); ok {
			return s.promptMessages(ctx, rq, fc, e, text, c)
		}
		body := rq.red.String(text)
		if data != nil && !reflect.ValueOf(data).IsZero() {
			var js []byte
			if js, err = rq.red.JSON(data); err != nil {
				return nil, s.rpcError(ctx, rq, fmt.Errorf("redacting prompt data: %w", err), nil)
			}
			body += "\n\n```json\n" + string(js) + "\n```"
		}
		if err := s.record(ctx, rq, fc, data); err != nil {
			return nil, s.rpcError(ctx, rq, err, nil)
		}
		return &mcp.GetPromptResult{
			Description: e.p.Description,
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: body}}},
		}, nil
	}
}

// promptMessages answers a prompt whose data is Content: the text, then
// one user message per block, every string redacted, the result labelled.
func (s *Server) promptMessages(ctx context.Context, rq *request, fc *flow.Call, e *promptEntry, text string, c Content) (*mcp.GetPromptResult, error) {
	if text != "" {
		c = append(Content{TextBlock{text}}, c...)
	}
	blocks, err := c.wire(rq.red)
	if err == nil {
		err = s.record(ctx, rq, fc, c)
	}
	if err != nil {
		return nil, s.rpcError(ctx, rq, err, nil)
	}
	msgs := make([]*mcp.PromptMessage, len(blocks))
	for i, b := range blocks {
		msgs[i] = &mcp.PromptMessage{Role: "user", Content: b}
	}
	return &mcp.GetPromptResult{Description: e.p.Description, Messages: msgs}, nil
}
