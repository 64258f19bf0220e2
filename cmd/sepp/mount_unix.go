//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
)

// isMountPoint reports whether dir is a folder on another file system than
// its parent: the root of a volume, such as /data in the container image,
// which cannot be renamed or replaced, only filled (sepp restore).
func isMountPoint(dir string) bool {
	a, err := os.Stat(dir)
	if err != nil || !a.IsDir() {
		return false
	}
	b, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev != sb.Dev
}
