// Package scaffold writes a new superstep project, the one `superstep
// init` makes: go.mod, main.go with a starter graph and its test, a
// Makefile, infra/template.yaml (the same SAM template as the
// repository's), samconfig.toml, sample events and a README.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// files holds the project's files; names ending in .tmpl are
// text/templates of [Project] (the suffix is dropped), others are copied.
//
//go:embed files
var files embed.FS

// GoVersion is the go directive of a project's go.mod: superstep's own.
const GoVersion = "1.26.8"

// Project describes the project to write.
type Project struct {
	// Module is the module path of the project (go.mod), e.g.
	// github.com/you/orders.
	Module string
	// Version of github.com/superstep/superstep to require. Empty or not
	// a semantic version: v0.0.0 (set Replace, or edit go.mod).
	Version string
	// Replace, when set, is a directory holding a superstep checkout that
	// go.mod replaces the module with.
	Replace string
	// Name of the binary and of the stack, table and queues (default: the
	// module path's last element).
	Name string
	// GoVersion is the go directive (default GoVersion).
	GoVersion string
}

// ErrNotEmpty is returned when the directory holds files already.
var ErrNotEmpty = errors.New("directory is not empty")

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Create writes the project into dir, creating dir if needed. It refuses
// an invalid module path and a directory that holds anything, writing
// nothing then, and returns the files it wrote (slash-separated,
// relative to dir).
func Create(dir string, p Project) ([]string, error) {
	if err := module.CheckPath(p.Module); err != nil {
		return nil, fmt.Errorf("invalid module path %q: %w; give one like github.com/you/%s", p.Module, err, path.Base(filepath.ToSlash(filepath.Clean(dir))))
	}
	if !semver.IsValid(p.Version) {
		p.Version = "v0.0.0"
	}
	if p.Name == "" {
		p.Name = path.Base(p.Module)
		if _, major, ok := module.SplitPathVersion(p.Module); ok && major != "" {
			p.Name = path.Base(strings.TrimSuffix(p.Module, major))
		}
	}
	p.Name = strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(p.Name), "-"), "-")
	if p.Name == "" {
		p.Name = "app"
	}
	if p.GoVersion == "" {
		p.GoVersion = GoVersion
	}
	if p.Replace != "" {
		abs, err := filepath.Abs(p.Replace)
		if err != nil {
			return nil, err
		}
		p.Replace = abs
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return nil, fmt.Errorf("%s: %w (it holds %s): give a new or empty directory", dir, ErrNotEmpty, entries[0].Name())
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	// Render everything first: nothing is written if a template fails.
	out := map[string][]byte{}
	var names []string
	err = fs.WalkDir(files, "files", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(name, "files/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			t, err := template.New(rel).Option("missingkey=error").Parse(string(b))
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, p); err != nil {
				return err
			}
			b = buf.Bytes()
		}
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		out[rel] = b
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("render the project: %w", err)
	}
	for _, rel := range names {
		f := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, out[rel], 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
