package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxBytes bounds the README: it is the front door (what tenantmcp
// is, the quick start, one tool, scopes from claims, the conformance
// command), and everything else lives in docs/.
const readmeMaxBytes = 15000

// TestReadmeSize keeps README.md at most readmeMaxBytes long.
func TestReadmeSize(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, more than %d: move the detail into a page of docs/ and link it", len(b), readmeMaxBytes)
	}
}

// TestDocLinks checks every relative link of README.md, bench/README.md
// and docs/*.md: the file it names exists, and a #fragment names a heading
// of the Markdown file it points into.
func TestDocLinks(t *testing.T) {
	files := []string{"../README.md", "../bench/README.md"}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(b)) {
			if err := checkLink(f, link); err != nil {
				t.Errorf("%s: link %q: %v", strings.TrimPrefix(f, "../"), link, err)
			}
		}
	}
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeRE    = regexp.MustCompile("`[^`\n]*`")
	schemeRE  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// markdownLinks returns the targets of the inline links and images of a
// Markdown text, outside code blocks and code spans.
func markdownLinks(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		line = codeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// proseLines returns the lines of md outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

func checkLink(from, link string) error {
	if schemeRE.MatchString(link) {
		return nil // absolute URL: not checked here
	}
	path, frag, _ := strings.Cut(link, "#")
	target := from
	if path != "" {
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("no such file or directory %s", strings.TrimPrefix(filepath.ToSlash(target), "../"))
		}
	}
	if frag == "" || !strings.HasSuffix(target, ".md") {
		return nil
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	anchors := headingAnchors(string(b))
	if !anchors[frag] {
		return fmt.Errorf("%s has no heading with anchor #%s", strings.TrimPrefix(filepath.ToSlash(target), "../"), frag)
	}
	return nil
}

// headingAnchors returns the anchors GitHub gives the headings of md:
// lower case, punctuation other than '-' and '_' removed, spaces as '-',
// and "-1", "-2", … on repeats.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(md) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
