package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// BackupFormat names the layout of a backup (its files and manifest); a
// restore refuses any other.
const BackupFormat = "sepp-backup/1"

// Backuper is implemented by a store that can copy itself while it serves:
// the embedded store. The PostgreSQL store does not implement it: its
// database is backed up with PostgreSQL's own tools.
type Backuper interface {
	// Backup makes a consistent copy of the store in a new folder under
	// BackupRoot named params.ID, and describes it. The copy opens as a
	// store holding every write acknowledged before the call and nothing
	// that breaks the acknowledgement mark.
	Backup(ctx context.Context, params *BackupParams) (*BackupCopy, error)
	// BackupRoot is the folder the copies are made in: beside the data, on
	// the same file system, so the copy's tables are hard links. Whoever
	// asked for a copy removes it.
	BackupRoot() string
}

// BackupParams are the parameters of Backuper.Backup.
type BackupParams struct {
	// ID names the copy's folder under BackupRoot; it must not exist.
	ID string
	// Now judges the copy's counts (a scheduled job whose run-at has passed
	// is available; a dedup record past its window is not live).
	Now time.Time
}

// BackupCopy describes a copy Backup made.
type BackupCopy struct {
	// Dir is the copy's folder.
	Dir string
	// SchemaVersion is the version of the key layout the copy holds.
	SchemaVersion int64
	// AckedCommits and AckedJobs are the acknowledgement mark the copy
	// carries: the group commits it holds and the jobs they created.
	AckedCommits, AckedJobs int64
	// Queues are the copy's jobs by state and live dedup records.
	Queues []QueueStats
	// Files are every file of the copy, sorted by path.
	Files []BackupFile
}

// BackupFile is one file of a backup.
type BackupFile struct {
	// Path is relative to the backup's folder, with forward slashes.
	Path string
	Size int64
	// SHA256 is the file's SHA-256, lowercase hex.
	SHA256 string
}

// ListBackupFiles lists every regular file under dir, recursively, with its
// size and SHA-256, sorted by path: what a backup's manifest names, and
// what a restore compares with it. A file that is not regular (a link, a
// device) is an error: a copy of the store holds none.
func ListBackupFiles(dir string) ([]BackupFile, error) {
	var files []BackupFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		f, err := HashFile(path)
		if err != nil {
			return err
		}
		f.Path = filepath.ToSlash(rel)
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// HashFile reads the file at path and returns its size and SHA-256 (Path
// left empty).
func HashFile(path string) (BackupFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return BackupFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return BackupFile{}, err
	}
	return BackupFile{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
