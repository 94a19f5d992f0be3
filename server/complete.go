package server

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
)

// MaxCompletions is the most values one completion/complete answer
// carries (the MCP limit).
const MaxCompletions = 100

// Completion offers values for a prompt argument or a resource template
// variable (MCP completion/complete).
type Completion struct {
	// Func returns candidates for the partial value prefix; args holds the
	// other arguments the client has already filled in. It runs under the
	// caller's scope with the guarded DB, like a tool handler, so it can
	// only suggest rows the caller's tenant reaches.
	Func func(ctx context.Context, db *guardedsql.DB, prefix string, args map[string]string) ([]string, error)
	// PII is the redact category of the values ("" if they are not
	// personal data). A value is suggested only if the caller's role may
	// see it in clear: a masked suggestion is useless, and counting them
	// would tell what the role may not see. Every value also passes the
	// redactor's detectors unchanged or is dropped.
	PII redact.Category
}

// complete is the server's completion/complete handler, a part of the
// pipeline. A reference the caller may not use (Require) answers exactly
// like a reference that does not exist: no values.
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	rq, p := requestOf(ctx), req.Params
	rq.outcome = OutcomeOK
	comp, name := s.completionFor(p)
	rq.name = name
	var vals []string
	if comp != nil && comp.Func != nil {
		kind, key := kindResource, p.Ref.URI
		if p.Ref.Type == "ref/prompt" {
			kind, key = kindPrompt, p.Ref.Name
		}
		if s.authorize(kind, key, rq.caller) == nil {
			var err error
			if vals, err = s.completeValues(ctx, rq, comp, p); err != nil {
				return nil, err
			}
		}
	}
	if vals == nil {
		vals = []string{}
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: vals, Total: len(vals)}}
	if len(vals) > MaxCompletions {
		res.Completion.Values, res.Completion.HasMore = vals[:MaxCompletions], true
	}
	return res, nil
}

func (s *Server) completeValues(ctx context.Context, rq *request, comp *Completion, p *mcp.CompleteParams) ([]string, error) {
	var args map[string]string
	if p.Context != nil {
		args = p.Context.Arguments
	}
	ctx, _, cancel, _ := s.enter(ctx, rq, rq.caller.scope, nil, nil)
	defer cancel()
	raw, err := safely(func() ([]string, error) { return comp.Func(ctx, s.opts.DB, p.Argument.Value, args) })
	if err != nil {
		// Not found is no values, like an unknown reference.
		return nil, s.rpcError(ctx, rq, err, func() error { return nil })
	}
	out := make([]string, 0, len(raw))
	seen := map[string]bool{}
	for _, v := range raw {
		if v == "" || seen[v] || !revealed(rq.red, comp.PII, v) {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	sort.Strings(out)
	rq.rows = len(out)
	return out, nil
}

// completionFor finds the Completion of p's reference and argument, and
// names it for the audit record.
func (s *Server) completionFor(p *mcp.CompleteParams) (*Completion, string) {
	if p == nil || p.Ref == nil {
		return nil, ""
	}
	arg := p.Argument.Name
	switch p.Ref.Type {
	case "ref/prompt":
		s.mu.Lock()
		e := s.surface.prompts[p.Ref.Name]
		s.mu.Unlock()
		if e == nil {
			return nil, "prompt:" + p.Ref.Name
		}
		for _, pa := range e.p.Args {
			if pa.Name == arg {
				return pa.Complete, "prompt:" + p.Ref.Name + "/" + arg
			}
		}
		return nil, "prompt:" + p.Ref.Name
	case "ref/resource":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.surface.resources {
			if e.key == p.Ref.URI {
				if comp, ok := e.compl[arg]; ok {
					return &comp, "resource:" + e.name + "/" + arg
				}
				return nil, "resource:" + e.name
			}
		}
	}
	return nil, ""
}

// revealed reports whether the caller's redaction leaves v unchanged as a
// value of category cat (a field tagged pii:"<cat>"), and its detectors
// find nothing in it.
func revealed(red *redact.Scoped, cat redact.Category, v string) bool {
	if red.String(v) != v {
		return false
	}
	if cat == "" {
		return true
	}
	t := reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: reflect.TypeFor[string](),
		Tag: reflect.StructTag(`json:"v" pii:"` + string(cat) + `"`),
	}})
	x := reflect.New(t).Elem()
	x.Field(0).SetString(v)
	js, err := red.JSON(x.Interface())
	if err != nil {
		return false
	}
	var back struct {
		V *string `json:"v"`
	}
	if json.Unmarshal(js, &back) != nil || back.V == nil {
		return false
	}
	return *back.V == v
}
