//lint:file-ignore SA1019 the suite still exercises roots, deprecated by 2026-07-28 (SEP-2577)

package mcpfixture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// The fixtures that ask the person behind the client for input go through
// server.Input only: a 2026-07-28 client gets an input-required result with
// a signed requestState, a 2025-era client in a session a server-to-client
// request, and one handler serves both.

func schema(js string) json.RawMessage { return json.RawMessage(js) }

var (
	nameSchema    = schema(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	confirmSchema = schema(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	colorSchema   = schema(`{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`)
	contextSchema = schema(`{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}`)
	// The SEP-1034 defaults and SEP-1330 enum forms the 2025-11-25 suite checks.
	defaultsSchema = schema(`{"type":"object","properties":{
		"name":{"type":"string","description":"User name","default":"John Doe"},
		"age":{"type":"integer","description":"User age","default":30},
		"score":{"type":"number","description":"User score","default":95.5},
		"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
		"verified":{"type":"boolean","description":"Verification status","default":true}}}`)
	enumsSchema = schema(`{"type":"object","properties":{
		"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
		"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
		"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
		"untitledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},
		"titledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]}}}}`)
)

func elicit(msg string, s json.RawMessage) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: msg, RequestedSchema: s}
}

func sample(prompt string, max int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}}, MaxTokens: max}
}

// accepted is the content of an accepted elicitation (nil otherwise).
func accepted(r mcp.InputResponse) map[string]any {
	if e, ok := r.(*mcp.ElicitResult); ok && e.Action == "accept" {
		return e.Content
	}
	return nil
}

// sampled is the text of a sampling answer.
func sampled(r mcp.InputResponse) string {
	var cs []mcp.Content
	switch r := r.(type) {
	case *mcp.CreateMessageResult:
		cs = []mcp.Content{r.Content}
	case *mcp.CreateMessageWithToolsResult:
		cs = r.Content
	}
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "(non-text response)"
}

func elicitResult(r mcp.InputResponse) string {
	e, _ := r.(*mcp.ElicitResult)
	if e == nil {
		return "Elicitation result: none"
	}
	return fmt.Sprintf("Elicitation result: action=%s, content=%v", e.Action, e.Content)
}

// ask is server.Input for one request.
func ask(ctx context.Context, id string, r mcp.InputRequest) (mcp.InputResponse, error) {
	got, err := server.Input(ctx, mcp.InputRequestMap{id: r})
	return got[id], err
}

// textTool registers a tool without arguments that answers text.
func textTool(s *server.Server, name, desc string, h func(ctx context.Context) (string, error)) error {
	return server.AddTool(s, server.Tool{Name: name, Description: desc}, func(ctx context.Context, _ *guardedsql.DB, _ none) (Text, error) {
		t, err := h(ctx)
		return Text{t}, err
	})
}

// PromptIn and MessageIn are the arguments of the 2025 sampling and
// elicitation fixtures.
type PromptIn struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
}
type MessageIn struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

func registerInput(s *server.Server) error {
	hello := func(ctx context.Context) (string, error) {
		a, err := ask(ctx, "user_name", elicit("What is your name?", nameSchema))
		if err != nil {
			return "", err
		}
		name, _ := accepted(a)["name"].(string)
		return fmt.Sprintf("Hello, %s!", name), nil
	}
	confirm := func(ctx context.Context) (string, error) {
		a, err := ask(ctx, "confirm", elicit("Please confirm", confirmSchema))
		if err != nil {
			return "", err
		}
		if accepted(a) == nil {
			return "not confirmed", nil
		}
		return "state-ok: requestState received and confirmation accepted", nil
	}
	errs := []error{
		server.AddTool(s, server.Tool{Name: "test_sampling", Description: "Asks the client's LLM (sampling)."},
			func(ctx context.Context, _ *guardedsql.DB, in PromptIn) (Text, error) {
				a, err := ask(ctx, "sampling", sample(in.Prompt, 100))
				if err != nil {
					return Text{}, err
				}
				return Text{"LLM response: " + sampled(a)}, nil
			}),
		server.AddTool(s, server.Tool{Name: "test_elicitation", Description: "Asks the user for a username (elicitation)."},
			func(ctx context.Context, _ *guardedsql.DB, in MessageIn) (Text, error) {
				a, err := ask(ctx, "username", elicit(in.Message,
					schema(`{"type":"object","properties":{"username":{"type":"string","description":"Your preferred username"}},"required":["username"]}`)))
				if err != nil {
					return Text{}, err
				}
				return Text{elicitResult(a)}, nil
			}),
		textTool(s, "test_elicitation_sep1034_defaults", "Elicits primitives with defaults (SEP-1034).", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "defaults", elicit("Test defaults for primitives", defaultsSchema))
			return elicitResult(a), err
		}),
		textTool(s, "test_elicitation_sep1330_enums", "Elicits the enum forms (SEP-1330).", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "enums", elicit("Test enum schemas", enumsSchema))
			return elicitResult(a), err
		}),
		textTool(s, "test_input_required_result_elicitation", "Asks for the caller's name.", hello),
		textTool(s, "test_input_required_result_request_state", "Asks for a confirmation.", confirm),
		textTool(s, "test_input_required_result_tampered_state", "Asks for a confirmation.", confirm),
		textTool(s, "test_input_required_result_sampling", "Asks the client's LLM.", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "capital_question", sample("What is the capital of France?", 100))
			return "Sampling response: " + sampled(a), err
		}),
		textTool(s, "test_input_required_result_list_roots", "Asks for the client's roots.", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "client_roots", &mcp.ListRootsParams{})
			if err != nil {
				return "", err
			}
			return "Client exposed roots: " + roots(a), nil
		}),
		textTool(s, "test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots in one round.", func(ctx context.Context) (string, error) {
			got, err := server.Input(ctx, mcp.InputRequestMap{
				"user_name":    elicit("What is your name?", nameSchema),
				"greeting":     sample("Generate a greeting", 50),
				"client_roots": &mcp.ListRootsParams{},
			})
			if err != nil {
				return "", err
			}
			name, _ := accepted(got["user_name"])["name"].(string)
			return fmt.Sprintf("%s %s, roots: %s", sampled(got["greeting"]), name, roots(got["client_roots"])), nil
		}),
		textTool(s, "test_input_required_result_multi_round", "Asks for a name, then a colour.", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "step1", elicit("Step 1: What is your name?", nameSchema))
			if err != nil {
				return "", err
			}
			b, err := ask(ctx, "step2", elicit("Step 2: What is your favorite color?", colorSchema))
			if err != nil {
				return "", err
			}
			name, _ := accepted(a)["name"].(string)
			color, _ := accepted(b)["color"].(string)
			return fmt.Sprintf("Multi-round complete: %s likes %s", name, color), nil
		}),
		textTool(s, "test_input_required_result_capabilities", "Asks only what the client declared it can answer.", func(ctx context.Context) (string, error) {
			want := mcp.InputRequestMap{}
			for id, r := range map[string]mcp.InputRequest{
				"user_name":    elicit("What is your name?", nameSchema),
				"greeting":     sample("Generate a short greeting", 50),
				"client_roots": &mcp.ListRootsParams{},
			} {
				if server.CanInput(ctx, r) {
					want[id] = r
				}
			}
			if len(want) == 0 {
				return "No declared client capability supports an in-band input request", nil
			}
			if _, err := server.Input(ctx, want); err != nil {
				return "", err
			}
			return "Capability-aware input requests fulfilled", nil
		}),
		textTool(s, "test_missing_capability", "Needs the client's sampling capability.", func(ctx context.Context) (string, error) {
			a, err := ask(ctx, "sampling", sample("Say hello", 20))
			return "LLM response: " + sampled(a), err
		}),
		// SEP-2575 diagnostics: a response stream must carry no request of
		// the server's own (tenantmcp never sends one), and no log message
		// reaches a client that set no log level (server.Log drops it).
		textTool(s, "test_streaming_elicitation", "Answers with a plain result: no request on the response stream.", func(context.Context) (string, error) {
			return "stream observed: result frames only, no top-level requests", nil
		}),
		textTool(s, "test_logging_tool", "Logs at info: only a client that set a log level receives it.", func(ctx context.Context) (string, error) {
			return "logged", server.Log(ctx, "info", "test_logging_tool", "Logging tool called")
		}),
		// SEP-2575 list_changed on a subscription stream: registering a tool
		// or prompt on the running server is the change.
		textTool(s, "test_trigger_tool_change", "Adds a tool to the running server.", func(context.Context) (string, error) {
			n := changes.Add(1)
			return "added", textTool(s, fmt.Sprintf("test_added_tool_%d", n), "Added at run time.", func(context.Context) (string, error) { return "added", nil })
		}),
		textTool(s, "test_trigger_prompt_change", "Adds a prompt to the running server.", func(context.Context) (string, error) {
			n := changes.Add(1)
			return "added", server.AddPrompt(s, server.Prompt{Name: fmt.Sprintf("test_added_prompt_%d", n), Description: "Added at run time."},
				func(context.Context, *guardedsql.DB, map[string]string) (string, any, error) {
					return "added", nil, nil
				})
		}),
		server.AddPrompt(s, server.Prompt{Name: "test_input_required_result_prompt", Description: "A prompt that asks for context."},
			func(ctx context.Context, _ *guardedsql.DB, _ map[string]string) (string, any, error) {
				a, err := ask(ctx, "user_context", elicit("Please provide context for the prompt", contextSchema))
				if err != nil {
					return "", nil, err
				}
				c, _ := accepted(a)["context"].(string)
				return "Context: " + c, nil, nil
			}),
	}
	return errors.Join(errs...)
}

// changes numbers the tools and prompts the trigger fixtures add.
var changes atomic.Int64

func roots(r mcp.InputResponse) string {
	l, _ := r.(*mcp.ListRootsResult)
	if l == nil {
		return "none"
	}
	var uris []string
	for _, x := range l.Roots {
		uris = append(uris, x.URI)
	}
	sort.Strings(uris)
	return strings.Join(uris, ", ")
}
