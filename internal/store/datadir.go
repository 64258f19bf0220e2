package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ForeignDataError is what an embedded store's Open returns when its data
// directory holds the files of the other embedded engine: a directory the
// SQLite store wrote is never opened as an empty Pebble store, nor the
// reverse.
type ForeignDataError struct {
	Dir     string // the data directory
	File    string // the file that gave the other engine away, in Dir
	Engine  string // the engine that wrote it: "SQLite" or "Pebble"
	Backend string // the storage.backend that opens it: "sqlite" or "embedded"
}

func (e *ForeignDataError) Error() string {
	return fmt.Sprintf("this directory holds a %s store (%s); set backend = %q (or SEPP_STORAGE_BACKEND=%s) to serve it, or point path at a new directory",
		e.Engine, e.File, e.Backend, e.Backend)
}

// SQLiteDatabaseFile is the name of the SQLite store's database in its data
// directory; with its -wal and -shm files, what marks a SQLite directory.
const SQLiteDatabaseFile = "sepp.db"

// CheckNoSQLite returns a *ForeignDataError if dir holds the SQLite store's
// files, nil if it does not (or does not exist).
func CheckNoSQLite(dir string) error {
	for _, name := range []string{SQLiteDatabaseFile, SQLiteDatabaseFile + "-wal", SQLiteDatabaseFile + "-shm"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return &ForeignDataError{Dir: dir, File: name, Engine: "SQLite", Backend: "sqlite"}
		}
	}
	return nil
}

// CheckNoPebble returns a *ForeignDataError if dir holds a Pebble
// database (a CURRENT, MANIFEST-*, OPTIONS-* or marker.manifest.* file),
// nil if it does not (or does not exist). A lone LOCK file does not count:
// it is left by an Open that failed before the database was created.
func CheckNoPebble(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // missing or unreadable: the engine's own Open reports it
	}
	for _, e := range entries {
		n := e.Name()
		if n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker.manifest.") {
			return &ForeignDataError{Dir: dir, File: n, Engine: "Pebble", Backend: "embedded"}
		}
	}
	return nil
}
