package main

import "syscall"

// sysProcAttr has the kernel kill a child when this process dies, so a
// run cut short leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
