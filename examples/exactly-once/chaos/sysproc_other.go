//go:build !linux

package main

import "syscall"

// sysProcAttr: without Linux's Pdeathsig, the children are stopped by the
// run's own cleanup only.
func sysProcAttr() *syscall.SysProcAttr { return nil }
