package store

import (
	"fmt"
	"os"
	"path/filepath"
)

// ForeignDataError is what the embedded store's Open returns when its data
// directory holds the files of the earlier embedded engine, SQLite, which
// this release cannot read: such a directory is never opened as a new,
// empty store beside the jobs it holds.
type ForeignDataError struct {
	Dir    string // the data directory
	File   string // the file that gave the other engine away, in Dir
	Engine string // the engine that wrote it: "SQLite"
}

func (e *ForeignDataError) Error() string {
	return fmt.Sprintf("this directory holds a %s store (%s), written by an earlier Sepp release whose embedded engine this release cannot read; "+
		"drain its jobs with the release that wrote it, then point path at a new directory", e.Engine, e.File)
}

// SQLiteDatabaseFile is the name of the earlier SQLite store's database in
// its data directory; with its -wal and -shm files, what marks a SQLite
// directory.
const SQLiteDatabaseFile = "sepp.db"

// CheckNoSQLite returns a *ForeignDataError if dir holds the earlier SQLite
// store's files, nil if it does not (or does not exist).
func CheckNoSQLite(dir string) error {
	for _, name := range []string{SQLiteDatabaseFile, SQLiteDatabaseFile + "-wal", SQLiteDatabaseFile + "-shm"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return &ForeignDataError{Dir: dir, File: name, Engine: "SQLite"}
		}
	}
	return nil
}
