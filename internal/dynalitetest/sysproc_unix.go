//go:build unix && !linux

package dynalitetest

import "syscall"

// sysProcAttr puts the server in its own process group, so that Stop kills
// it with any children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
