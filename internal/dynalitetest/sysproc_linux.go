package dynalitetest

import "syscall"

// sysProcAttr puts the server in its own process group, so that Stop kills
// it with any children, and has the kernel kill it if the test binary dies
// without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
