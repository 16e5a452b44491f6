package scaffold

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")
	written, err := Create(dir, Project{Module: "github.com/you/orders", Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "main.go", "main_test.go", "Makefile", "README.md", "samconfig.toml", ".gitignore",
		"infra/template.yaml", "infra/local-env.json", "events/api-create-run.json", "events/sqs-tick.json"} {
		if !slices.Contains(written, want) {
			t.Errorf("%s not written (wrote %v)", want, written)
		}
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Error(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatalf("go.mod: %v\n%s", err, b)
	}
	if mf.Module.Mod.Path != "github.com/you/orders" || len(mf.Require) != 1 || mf.Require[0].Mod.Version != "v1.2.3" || len(mf.Replace) != 0 {
		t.Errorf("go.mod:\n%s", b)
	}
	for _, f := range written {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(b, []byte("{{")) || bytes.Contains(b, []byte("<no value>")) {
			t.Errorf("%s holds an unrendered template", f)
		}
	}
	if sam, _ := os.ReadFile(filepath.Join(dir, "samconfig.toml")); !strings.Contains(string(sam), `stack_name = "orders"`) {
		t.Errorf("samconfig.toml does not name the stack after the project:\n%s", sam)
	}
}

// TestCreateRefuses: a non-empty directory or an invalid module path is
// refused with what to do, and nothing is written.
func TestCreateRefuses(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644)
	for _, tc := range []struct {
		name, dir, module, want string
	}{
		{"non-empty dir", full, "github.com/you/orders", "is not empty (it holds notes.txt): give a new or empty directory"},
		{"invalid module", filepath.Join(t.TempDir(), "x"), "github.com/you/or ders", `invalid module path "github.com/you/or ders"`},
		{"module with no dot", filepath.Join(t.TempDir(), "x"), "orders", "give one like github.com/you/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadDir(filepath.Dir(tc.dir))
			_, err := Create(tc.dir, Project{Module: tc.module})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			after, _ := os.ReadDir(filepath.Dir(tc.dir))
			if len(after) != len(before) {
				t.Errorf("wrote %v", after)
			}
			if entries, _ := os.ReadDir(full); len(entries) != 1 {
				t.Errorf("changed the non-empty dir: %v", entries)
			}
		})
	}
}

// TestSameTemplateAsTheRepository: a project deploys with the
// repository's SAM template (kept in step by copying it:
// cp infra/template.yaml pkg/internal/scaffold/files/infra/) and the go version of
// its go.mod.
func TestSameTemplateAsTheRepository(t *testing.T) {
	repo, err := os.ReadFile("../../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := files.ReadFile("files/infra/template.yaml")
	if !bytes.Equal(repo, ours) {
		t.Error("files/infra/template.yaml differs from infra/template.yaml: cp infra/template.yaml pkg/internal/scaffold/files/infra/")
	}
	b, _ := os.ReadFile("../../../go.mod")
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Go.Version != GoVersion {
		t.Errorf("GoVersion %s, superstep's go.mod says %s", GoVersion, mf.Go.Version)
	}
}

// TestFunctionCountInText: the scaffolded main.go and Makefile say how
// many Lambda functions the scaffolded template has, and say it right.
func TestFunctionCountInText(t *testing.T) {
	tpl, err := files.ReadFile("files/infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(tpl), "Type: AWS::Serverless::Function")
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	if n < 1 || n >= len(words) {
		t.Fatalf("the scaffolded template has %d functions", n)
	}
	for _, f := range []string{"files/main.go.tmpl", "files/Makefile.tmpl"} {
		b, err := files.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Comment markers dropped, lines joined.
		text := strings.Join(strings.Fields(strings.NewReplacer("//", " ", "#", " ").Replace(string(b))), " ")
		if !strings.Contains(text, words[n]+" Lambda functions") && !strings.Contains(text, "the "+words[n]+" functions") {
			t.Errorf("%s does not say the template's %s functions", f, words[n])
		}
		for i, w := range words {
			if i != n && (strings.Contains(text, " "+w+" Lambda functions") || strings.Contains(text, "the "+w+" functions")) {
				t.Errorf("%s says %q functions; the template has %d", f, w, n)
			}
		}
	}
}
