package main

import (
	"os"
	"strings"
	"testing"
)

func Example_main() {
	main()
	// Output: completed A person will call you back within the hour.
}

// snippet returns the lines of readme.go between the README markers.
func snippet(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("readme.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(src), "// README:begin\n")
	body, _, ok2 := strings.Cut(rest, "// README:end")
	if !ok1 || !ok2 {
		t.Fatal("readme.go lacks the // README:begin and // README:end markers")
	}
	return strings.Split(strings.TrimSpace(body), "\n")
}

// The README promises a short example: fewer than 30 lines of code, not
// counting blank lines, comments and the import block.
func TestSnippetIsShort(t *testing.T) {
	code, inImports := 0, false
	for _, l := range snippet(t) {
		l = strings.TrimSpace(l)
		switch {
		case l == "import (":
			inImports = true
		case inImports:
			inImports = l != ")"
		case l != "" && !strings.HasPrefix(l, "//"):
			code++
		}
	}
	if code >= 30 {
		t.Errorf("the README example has %d lines of code; keep it under 30", code)
	}
}

// The README shows the example as it is here (ignoring indentation), so
// that what readers copy compiles and runs.
func TestREADMEMatches(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !shows(string(readme), snippet(t)) {
		t.Error("README.md shows a different helpdesk example than examples/readme/readme.go; paste the lines between the README markers into it")
	}
}

func TestShows(t *testing.T) {
	lines := snippet(t)
	fenced := "# superstep\n\n```go\n" + strings.ReplaceAll(strings.Join(lines, "\n"), "\t", "    ") + "\n```\n"
	if !shows(fenced, lines) {
		t.Error("the snippet, re-indented inside a README, is not found")
	}
	edited := strings.Replace(fenced, "within the hour", "tomorrow", 1)
	if shows(edited, lines) {
		t.Error("an edited snippet is taken for the real one")
	}
}

// shows reports whether text contains the lines of code, ignoring
// indentation and blank lines.
func shows(text string, code []string) bool {
	norm := func(lines []string) string {
		var out []string
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	return strings.Contains(norm(strings.Split(text, "\n")), norm(code))
}
