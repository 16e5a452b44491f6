package awsbench_test

import (
	_ "embed"
	"os"
	"path/filepath"
)

// motoPatch speeds up moto's SQS for queues of thousands of messages
// without changing its answers; see the file's comment and bench/README.md
// ("2026-11-27, stop 34").
//
//go:embed testdata/motopatch/usercustomize.py
var motoPatch []byte

// patchMoto writes motoPatch into a new directory and puts it on
// PYTHONPATH, which internal/mototest keeps (after its own directory) for
// the moto_server it starts: Python imports usercustomize from it after
// mototest's sitecustomize. It returns a function that removes the
// directory. AWSBENCH_MOTO_PATCH=off is passed through to moto_server,
// where the patch then does nothing.
func patchMoto() (func(), error) {
	dir, err := os.MkdirTemp("", "awsbench-motopatch-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "usercustomize.py"), motoPatch, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	path := dir
	if old := os.Getenv("PYTHONPATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	if err := os.Setenv("PYTHONPATH", path); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return func() { os.RemoveAll(dir) }, nil
}
