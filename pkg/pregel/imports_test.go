package pregel_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineImportsStayDown: the engine's room stays closed. pkg/pregel
// imports only the standard library, and its conformance kit
// (checkpointtest) the standard library and pkg/pregel: nothing above the
// engine (pkg/runs, stores, internal/) is needed to test a Checkpointer.
func TestEngineImportsStayDown(t *testing.T) {
	const module = "github.com/superstep/superstep/"
	for _, tc := range []struct {
		dir     string
		allowed []string // module packages it may import
	}{
		{dir: ".", allowed: nil},
		{dir: "checkpointtest", allowed: []string{module + "pkg/pregel"}},
	} {
		for _, imp := range imports(t, tc.dir) {
			first, _, _ := strings.Cut(imp, "/")
			if !strings.Contains(first, ".") {
				continue // the standard library
			}
			ok := false
			for _, a := range tc.allowed {
				ok = ok || imp == a
			}
			if !ok {
				t.Errorf("pkg/pregel/%s imports %s; it may import only the standard library and %v", tc.dir, imp, tc.allowed)
			}
		}
	}
}

// imports lists what the non-test Go files of dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range af.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			out = append(out, p)
		}
	}
	return out
}
