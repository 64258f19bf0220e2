//go:build !linux

package pebble

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
