package infra

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeCmd runs make in dir as `sam build` does, without the variables of
// an enclosing make (its jobserver is not ours) or an ARTIFACTS_DIR from
// the environment.
func makeCmd(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to build the functions as sam build does: %v", err)
	}
	cmd := exec.Command("make", append([]string{"-C", dir}, args...)...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARTIFACTS_DIR":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	return cmd
}

// TestMakeBuildsBootstraps runs the Makefile target `sam build` runs for
// each function (make build-<LogicalId> ARTIFACTS_DIR=<dir>, in the
// function's CodeUri) and checks that it leaves a static linux/arm64
// executable named bootstrap, built from functions/<name> with the
// lambda.norpc tag.
func TestMakeBuildsBootstraps(t *testing.T) {
	tp := loadTemplate(t)
	fns := tp.resources("AWS::Serverless::Function")
	if len(fns) == 0 {
		t.Fatal("no functions in the template")
	}
	for _, fn := range fns {
		t.Run(fn.ID, func(t *testing.T) {
			t.Parallel()
			dir, err := codeDir(tp, fn)
			if err != nil {
				t.Fatal(err)
			}
			art := filepath.Join(t.TempDir(), "artifacts") // make creates it
			cmd := makeCmd(t, dir, "build-"+fn.ID, "ARTIFACTS_DIR="+art)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
			pkg := "github.com/superstep/superstep/functions/" + strings.ToLower(strings.TrimSuffix(fn.ID, "Function"))
			checkBootstrap(t, filepath.Join(art, "bootstrap"), pkg)
		})
	}
}

// TestEveryFunctionIsDeployed: each Lambda main under functions/ is a
// function of the template, <Name>Function, and each function of the
// template is built from one of them.
func TestEveryFunctionIsDeployed(t *testing.T) {
	tp := loadTemplate(t)
	entries, err := os.ReadDir(filepath.Join("..", "functions"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, strings.ToUpper(e.Name()[:1])+e.Name()[1:]+"Function")
		}
	}
	slices.Sort(dirs)
	var ids []string
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		ids = append(ids, fn.ID)
	}
	if !slices.Equal(dirs, ids) {
		t.Errorf("functions/ has the mains of %v; the template deploys %v", dirs, ids)
	}
}

// checkBootstrap checks that path is what provided.al2023 on arm64 runs.
func checkBootstrap(t *testing.T, path, pkg string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s is not executable (mode %v)", path, st.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s is not an ELF file: %v", path, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_AARCH64 {
		t.Errorf("%s: %v %v, want ELFCLASS64 EM_AARCH64", path, f.Class, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked; want a static binary (CGO_ENABLED=0)", path)
		}
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: no Go build info: %v", path, err)
	}
	if bi.Path != pkg {
		t.Errorf("%s was built from %s, want %s", path, bi.Path, pkg)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{
		"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0", "-tags": "lambda.norpc", "-trimpath": "true",
	} {
		if settings[k] != want {
			t.Errorf("%s: build setting %s = %q, want %q", path, k, settings[k], want)
		}
	}
}

// TestMakeBuildNeedsArtifactsDir: run by hand without ARTIFACTS_DIR, a
// build target says what to set instead of writing /bootstrap.
func TestMakeBuildNeedsArtifactsDir(t *testing.T) {
	tp := loadTemplate(t)
	dir, err := codeDir(tp, tp.resource(t, "TickFunction", "AWS::Serverless::Function"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := makeCmd(t, dir, "build-TickFunction").CombinedOutput()
	if err == nil {
		t.Fatalf("make build-TickFunction without ARTIFACTS_DIR succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "ARTIFACTS_DIR") {
		t.Errorf("make build-TickFunction without ARTIFACTS_DIR: the message does not name ARTIFACTS_DIR:\n%s", out)
	}
}
