package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutTableMatchesTree: the README's layout table names every
// package directory of the repository (pkg/..., internal/..., functions,
// cmd; a row for examples or bench covers what is under it), and every
// path it names exists.
func TestLayoutTableMatchesTree(t *testing.T) {
	const root = "../.."
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	cell := regexp.MustCompile("`([^`]+)`")
	var listed []string
	for line := range strings.SplitSeq(table, "\n") {
		first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		if !ok || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			listed = append(listed, expandBraces(strings.TrimSuffix(m[1], "/"))...)
		}
	}
	for _, p := range listed {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the layout table names %s, which does not exist", p)
		}
	}
	var dirs []string
	for _, top := range []string{"pkg", "internal", "functions", "cmd", "examples", "bench"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/testdata/") {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if !slices.Contains(dirs, filepath.ToSlash(rel)) {
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		covered := slices.Contains(listed, d)
		for _, p := range listed {
			// examples and bench rows cover their subdirectories.
			covered = covered || ((p == "examples" || p == "bench") && strings.HasPrefix(d, p+"/"))
		}
		if !covered {
			t.Errorf("README.md's layout table does not list %s", d)
		}
	}
}

// expandBraces expands one {a,b} group: functions/{api,tick} ->
// functions/api, functions/tick.
func expandBraces(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for alt := range strings.SplitSeq(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}
