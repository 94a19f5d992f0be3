package server_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeToolIsExampleAddTool keeps the README's "A tool in twenty
// lines" identical to the compiled, tested ExampleAddTool: the README's
// code block must be the example file's "readme:begin" … "readme:end"
// regions, dedented, in order.
func TestReadmeToolIsExampleAddTool(t *testing.T) {
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var regions []string
	rest := string(example)
	for {
		_, after, ok := strings.Cut(rest, "// readme:begin")
		if !ok {
			break
		}
		_, body, _ := strings.Cut(after, "\n")
		region, tail, ok := strings.Cut(body, "// readme:end")
		if !ok {
			t.Fatal("example_test.go: readme:begin without readme:end")
		}
		regions = append(regions, dedent(strings.TrimRight(region, " \t\n")))
		rest = tail
	}
	if len(regions) == 0 {
		t.Fatal("example_test.go has no readme:begin regions")
	}
	want := strings.Join(regions, "\n\n") + "\n"

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## A tool in twenty lines\n")
	if !ok {
		t.Fatal(`README.md has no "## A tool in twenty lines" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("README.md: no go code block in the section")
	}
	got, _, ok := strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md: unterminated code block")
	}
	if got != want {
		t.Errorf("README.md's tool differs from ExampleAddTool; replace the code block with:\n```go\n%s```", want)
	}
}

// dedent removes the leading tabs common to every non-empty line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "\n")
}
