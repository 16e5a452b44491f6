package infra

import (
	"os/exec"
	"strings"
	"testing"
)

// cliOnly are packages only the CLI uses: a Lambda bootstrap that links
// them initialises them in its cold start for nothing.
var cliOnly = []string{
	"github.com/spf13/cobra",
	"modernc.org/sqlite",
	"github.com/superstep/superstep/pkg/superstep",
	"github.com/superstep/superstep/pkg/inspector",
	"github.com/superstep/superstep/pkg/store/sqlite",
	"github.com/superstep/superstep/pkg/embedded",
	"github.com/superstep/superstep/pkg/schedule/sqlitesched",
	"github.com/superstep/superstep/pkg/internal/scaffold",
}

// TestBootstrapsLinkNoCLI: the functions/* bootstraps (pkg/lambdafn), and
// a program calling superstep.Main built with the superstep.lambda tag
// (the Lambda build of a scaffolded project), link none of the CLI's
// packages: no cobra, SQLite, inspector, embedded executor or scaffold.
// Without the tag, superstep.Main's program is the whole command.
func TestBootstrapsLinkNoCLI(t *testing.T) {
	// deps lists the packages each of pkgs links, built with tags.
	deps := func(tags string, pkgs ...string) map[string]map[string]bool {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, pkgs...)...)
		cmd.Dir = ".."
		cmd.Env = append(cmd.Environ(), "GOOS=linux", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		all := map[string]map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			set := map[string]bool{}
			for _, p := range f[1:] {
				set[p] = true
			}
			all[strings.TrimPrefix(f[0], "github.com/superstep/superstep/")] = set
		}
		return all
	}
	functions := deps("lambda.norpc", "./functions/...")
	for _, fn := range lambdaFunctions {
		linked := functions["functions/"+fn]
		if linked == nil {
			t.Fatalf("go list listed no functions/%s", fn)
		}
		for _, p := range cliOnly {
			if linked[p] {
				t.Errorf("functions/%s links %s", fn, p)
			}
		}
		if !linked["github.com/superstep/superstep/pkg/lambdafn"] {
			t.Errorf("functions/%s does not start through pkg/lambdafn", fn)
		}
	}
	tagged := deps("lambda.norpc,superstep.lambda", "./cmd/superstep")["cmd/superstep"]
	for _, p := range cliOnly {
		if tagged[p] && p != "github.com/superstep/superstep/pkg/superstep" { // the entry itself
			t.Errorf("superstep.Main built with -tags superstep.lambda links %s", p)
		}
	}
	whole := deps("lambda.norpc", "./cmd/superstep")["cmd/superstep"]
	for _, p := range []string{"github.com/spf13/cobra", "modernc.org/sqlite", "github.com/superstep/superstep/pkg/inspector"} {
		if !whole[p] {
			t.Errorf("superstep.Main built without the tag does not link %s: is it still the whole command?", p)
		}
	}
}
