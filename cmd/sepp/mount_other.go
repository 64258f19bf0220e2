//go:build !unix

package main

// isMountPoint is false where the file system's devices cannot be compared:
// sepp restore then replaces the data directory by renaming.
func isMountPoint(string) bool { return false }
