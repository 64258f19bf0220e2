package pebble

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data without its timestamps: the mark is rewritten in
// place, so its size never changes.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
