package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/store"
)

// backupLifetime is how long a copy nobody deleted is kept: long enough to
// fetch a large store over a slow link, short enough that a forgotten copy
// does not hold the disk space of tables the store has since compacted
// away.
const backupLifetime = time.Hour

// maxBackupRead is the most ReadBackupFile returns in one call (and its
// default): well under every transport's message limit.
const maxBackupRead = 1 << 20

// backupSet holds the copies CreateBackup made that are not deleted yet.
// Each has a timer on the server's Local clock that removes it
// backupLifetime after it was made; DeleteBackup and Shutdown stop it.
type backupSet struct {
	mu     sync.Mutex
	byID   map[string]*backupCopy
	closed bool // after Shutdown: nothing more is added
}

type backupCopy struct {
	dir   string
	files map[string]int64 // path (as the manifest writes it) -> size
	timer clock.Timer
}

// clearBackups removes every copy under the store's backup folder: those a
// server that stopped without deleting them left behind, which nobody can
// fetch any more (the ids lived in its memory).
func (s *Server) clearBackups() error {
	b, ok := store.As[store.Backuper](s.store)
	if !ok {
		return nil
	}
	if err := os.RemoveAll(b.BackupRoot()); err != nil {
		return fmt.Errorf("remove the backups left in %s: %w", b.BackupRoot(), err)
	}
	return nil
}

// add records a copy and arms its expiry; it reports false after Shutdown.
func (bs *backupSet) add(id string, c *backupCopy, local clock.Local, log func(id string, err error)) bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed {
		return false
	}
	if bs.byID == nil {
		bs.byID = map[string]*backupCopy{}
	}
	bs.byID[id] = c
	c.timer = local.AfterFunc(backupLifetime, func() { log(id, bs.remove(id)) })
	return true
}

func (bs *backupSet) get(id string) *backupCopy {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.byID[id]
}

// remove forgets the copy id and deletes its folder; errNoBackup when
// there is no such copy (deleted already, expired, or never made).
func (bs *backupSet) remove(id string) error {
	bs.mu.Lock()
	c := bs.byID[id]
	delete(bs.byID, id)
	bs.mu.Unlock()
	if c == nil {
		return errNoBackup
	}
	c.timer.Stop()
	return os.RemoveAll(c.dir)
}

// close removes every copy at Shutdown: nothing can fetch one after it.
func (bs *backupSet) close() error {
	bs.mu.Lock()
	bs.closed = true
	ids := make([]string, 0, len(bs.byID))
	for id := range bs.byID {
		ids = append(ids, id)
	}
	bs.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := bs.remove(id); err != nil && !errors.Is(err, errNoBackup) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var errNoBackup = errors.New("no such backup")

func unknownBackup(id string) *apiError {
	e := newError(connect.CodeNotFound, ReasonInvalidField,
		"backup_id: no backup %q on this server: it was deleted, it expired (a copy is kept %v), or the server restarted since; run sepp backup again", id, backupLifetime)
	e.metadata = map[string]string{"field": "backup_id"}
	return e
}

func (a *adminService) CreateBackup(ctx context.Context, _ *seppv1.CreateBackupRequest) (*seppv1.CreateBackupResponse, error) {
	b, ok := store.As[store.Backuper](a.s.store)
	if !ok {
		return nil, newError(connect.CodeFailedPrecondition, ReasonBackupUnsupported,
			"this server's store is PostgreSQL ([storage] backend = \"postgres\"), which Sepp does not copy: back the database up with PostgreSQL's own tools (pg_dump, pg_basebackup, or continuous archiving for point-in-time recovery)")
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(raw[:])
	now := a.s.now()
	c, err := b.Backup(ctx, &store.BackupParams{ID: id, Now: now})
	if err != nil {
		return nil, fmt.Errorf("make the backup: %w", err)
	}
	kept := &backupCopy{dir: c.Dir, files: make(map[string]int64, len(c.Files))}
	for _, f := range c.Files {
		kept.files[f.Path] = f.Size
	}
	if !a.s.backups.add(id, kept, a.s.local, a.s.backupExpired) {
		return nil, errors.Join(store.ErrClosed, os.RemoveAll(c.Dir))
	}
	return &seppv1.CreateBackupResponse{BackupId: id, Manifest: a.s.backupManifest(c, now)}, nil
}

// backupExpired logs the removal of a copy nobody deleted.
func (s *Server) backupExpired(id string, err error) {
	switch {
	case errors.Is(err, errNoBackup):
	case err != nil:
		s.log.Error("could not remove an expired backup", "backup_id", id, "err", err)
	default:
		s.log.Info("removed a backup nobody deleted", "backup_id", id, "after", backupLifetime.String())
	}
}

func (s *Server) backupManifest(c *store.BackupCopy, now time.Time) *seppv1.BackupManifest {
	m := &seppv1.BackupManifest{
		Format:        store.BackupFormat,
		ServerVersion: s.version,
		CreatedAt:     timestamppb.New(now),
		SchemaVersion: c.SchemaVersion,
		AckedCommits:  c.AckedCommits,
		AckedJobs:     c.AckedJobs,
		Queues:        queueInfos(c.Queues),
	}
	for _, f := range c.Files {
		m.Files = append(m.Files, &seppv1.BackupFile{Path: f.Path, Size: f.Size, Sha256: f.SHA256})
	}
	return m
}

func (a *adminService) ReadBackupFile(ctx context.Context, req *seppv1.ReadBackupFileRequest) (*seppv1.ReadBackupFileResponse, error) {
	c := a.s.backups.get(req.GetBackupId())
	if c == nil {
		return nil, unknownBackup(req.GetBackupId())
	}
	// Only the files the manifest lists: no other path (one with "..", an
	// absolute one) can name anything.
	size, ok := c.files[req.GetPath()]
	if !ok {
		return nil, invalidField("path", "%q is not a file of backup %s: name a path its manifest lists", req.GetPath(), req.GetBackupId())
	}
	n := int64(req.GetMaxBytes())
	switch {
	case n < 0:
		return nil, invalidField("max_bytes", "must be between 0 and %d (0: %d), got %d", maxBackupRead, maxBackupRead, n)
	case n == 0 || n > maxBackupRead:
		n = maxBackupRead
	}
	off := req.GetOffset()
	if off < 0 || off > size {
		return nil, invalidField("offset", "must be between 0 and the file's size, %d, got %d", size, off)
	}
	n = min(n, size-off)
	f, err := os.Open(filepath.Join(c.dir, filepath.FromSlash(req.GetPath())))
	if errors.Is(err, os.ErrNotExist) { // deleted while this call ran
		return nil, unknownBackup(req.GetBackupId())
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, n)
	if _, err := f.ReadAt(data, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("read %s of backup %s: %w", req.GetPath(), req.GetBackupId(), err)
	}
	return &seppv1.ReadBackupFileResponse{Data: data, Eof: off+n == size}, nil
}

func (a *adminService) DeleteBackup(ctx context.Context, req *seppv1.DeleteBackupRequest) (*seppv1.DeleteBackupResponse, error) {
	err := a.s.backups.remove(req.GetBackupId())
	if errors.Is(err, errNoBackup) {
		return nil, unknownBackup(req.GetBackupId())
	}
	if err != nil {
		return nil, fmt.Errorf("remove backup %s: %w", req.GetBackupId(), err)
	}
	return &seppv1.DeleteBackupResponse{}, nil
}
