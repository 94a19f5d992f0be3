package redact_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

type Guest struct {
	ID    string `json:"id"`
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
	Phone string `json:"phone" pii:"phone"`
	Notes string `json:"notes,omitempty"`
}

type Booking struct {
	ID    string `json:"id"`
	Room  int    `json:"room"`
	Guest Guest  `json:"guest"`
}

// A tool result redacted for two callers of the same hotel: the front desk
// may see guest phone numbers, a housekeeping user may not.
func Example() {
	r, err := redact.New(redact.Options{
		Reveal: map[string][]redact.Category{"front_desk": {redact.Phone}},
	})
	if err != nil {
		panic(err)
	}
	b := Booking{ID: "BK-1042", Room: 1204, Guest: Guest{
		ID: "g-7", Name: "Alice Smith", Email: "alice@example.com", Phone: "+44 20 7946 0958",
		Notes: "late arrival, alt. contact bob@example.org",
	}}
	hotel := []scope.Grant{{Level: "hotel", ID: "h-01"}}

	for _, role := range []string{"front_desk", "housekeeping"} {
		ctx := scopetest.NewContext(context.Background(), scopetest.New("u-"+role, hotel, role))
		red := r.For(ctx)
		out, err := red.JSON(b)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(out))
		fmt.Println(red.Report())
	}
	// Output:
	// {"id":"BK-1042","room":1204,"guest":{"id":"g-7","name":"[redacted:name]","email":"***@example.com","phone":"+44 20 7946 0958","notes":"late arrival, alt. contact ***@example.org"}}
	// redacted email=2 name=1; revealed phone=1
	// {"id":"BK-1042","room":1204,"guest":{"id":"g-7","name":"[redacted:name]","email":"***@example.com","phone":"***0958","notes":"late arrival, alt. contact ***@example.org"}}
	// redacted email=2 phone=1 name=1; revealed
}

// Tokens let a model match the same guest across results without seeing
// who it is; another tenant gets unrelated tokens for the same value.
func Example_tokens() {
	r, err := redact.New(redact.Options{
		Operators: map[redact.Category]redact.Operator{redact.Email: redact.Token, redact.Name: redact.Drop},
		TokenKey:  []byte("example master key, use 32+ random bytes in production"),
	})
	if err != nil {
		panic(err)
	}
	acme := r.ForScope(scopetest.New("u1", []scope.Grant{{Level: "chain", ID: "acme"}}))
	globex := r.ForScope(scopetest.New("u2", []scope.Grant{{Level: "chain", ID: "globex"}}))
	g := Guest{ID: "g-7", Name: "Alice Smith", Email: "alice@example.com"}

	a1, _ := acme.JSON(g)
	a2, _ := acme.JSON(Guest{ID: "g-8", Email: "ALICE@example.com"})
	b1, _ := globex.JSON(g)
	fmt.Println(string(a1))
	fmt.Println(string(a2))
	fmt.Println(string(b1))
	// Output:
	// {"id":"g-7","email":"tok_email_e2kncknkxh7zlngece2pepto","phone":""}
	// {"id":"g-8","email":"tok_email_e2kncknkxh7zlngece2pepto","phone":""}
	// {"id":"g-7","email":"tok_email_zfswat6kziknvokjk4azx6kj","phone":""}
}

func ExampleScoped_String() {
	red := redact.Default().ForScope(scopetest.New("u1", []scope.Grant{{Level: "chain", ID: "acme"}}))
	fmt.Println(red.String("Guest +1 (202) 555-0143 paid with 4111 1111 1111 1111 from 203.0.113.7, order ORD-2024-000123 on 2024-06-01."))
	fmt.Println(red.String("retry with Authorization: Bearer 2YotnFZFEjr1zCsicMWpAA"))
	// Output:
	// Guest ***0143 paid with ****1111 from [redacted:ip], order ORD-2024-000123 on 2024-06-01.
	// retry with Authorization: Bearer [redacted:secret]
}

func ExampleScoped_Error() {
	red := redact.Default().For(context.Background()) // no scope: most restrictive
	err := fmt.Errorf("charge for alice@example.com: %w", errors.New("dial tcp 10.0.0.7:5432: connection refused"))
	fmt.Println(red.Error(err))
	// Output:
	// charge for [redacted:email]: dial tcp [redacted:ip]:5432: connection refused
}

func ExampleRedactor_Handler() {
	logger := slog.New(redact.Default().Handler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	ctx := scopetest.NewContext(context.Background(), scopetest.New("u1", []scope.Grant{{Level: "chain", ID: "acme"}}))
	logger.InfoContext(ctx, "lookup failed for alice@example.com",
		"guest", Guest{ID: "g-7", Name: "Alice Smith", Phone: "+44 20 7946 0958"},
		"err", errors.New("no booking for +44 20 7946 0958"))
	// Output:
	// level=INFO msg="lookup failed for ***@example.com" guest="{\"id\":\"g-7\",\"name\":\"[redacted:name]\",\"email\":\"\",\"phone\":\"***0958\"}" err="no booking for ***0958"
}

func ExampleCategoriesOf() {
	cats, err := redact.CategoriesOf(reflect.TypeFor[[]Booking]())
	fmt.Println(cats, err)
	fields, _ := redact.TaggedFields(reflect.TypeFor[[]Booking]())
	for _, f := range fields {
		fmt.Println(strings.Join(f.Path, "."), f.Category)
	}
	// Output:
	// [email phone name] <nil>
	// [].guest.name name
	// [].guest.email email
	// [].guest.phone phone
}
