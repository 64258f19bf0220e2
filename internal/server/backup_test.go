package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// A backup's manifest describes the copy (format, counts, every file), each
// file it lists reads back whole with the manifest's size and SHA-256, and
// after DeleteBackup the copy is gone.
func TestBackupReadAndDelete(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 20 {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mail", JobType: "send", IdempotencyKey: sepp.Key("k" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := c.CreateBackup(ctx)
	if err != nil {
		t.Fatalf("CreateBackup: %v", err)
	}
	m := b.Manifest
	if m.GetFormat() != store.BackupFormat || m.GetServerVersion() != "dev" || m.GetSchemaVersion() != 2 || m.GetAckedJobs() != 20 ||
		!m.GetCreatedAt().AsTime().Equal(srv.Clock.Now()) || len(m.GetQueues()) != 1 || m.GetQueues()[0].GetAvailable() != 20 || m.GetQueues()[0].GetDedupRecords() != 20 {
		t.Fatalf("manifest %v: want format %s, version dev, schema 2, 20 acknowledged jobs and queue mail with 20 available and 20 dedup records, made now", m, store.BackupFormat)
	}
	for _, f := range m.GetFiles() {
		var buf bytes.Buffer
		n, err := c.ReadBackup(ctx, b.ID, f.GetPath(), &buf)
		if err != nil {
			t.Fatalf("read %s: %v", f.GetPath(), err)
		}
		sum := sha256.Sum256(buf.Bytes())
		if n != f.GetSize() || hex.EncodeToString(sum[:]) != f.GetSha256() {
			t.Fatalf("%s read back as %d bytes, SHA-256 %x; the manifest says %d, %s", f.GetPath(), n, sum, f.GetSize(), f.GetSha256())
		}
	}
	if err := c.DeleteBackup(ctx, b.ID); err != nil {
		t.Fatalf("DeleteBackup: %v", err)
	}
	_, err = c.ReadBackup(ctx, b.ID, m.GetFiles()[0].GetPath(), &bytes.Buffer{})
	if !errors.Is(err, sepp.ErrInvalidField) || !strings.Contains(err.Error(), "run sepp backup again") {
		t.Fatalf("read after the delete: %v, want INVALID_FIELD naming the backup", err)
	}
	if err := c.DeleteBackup(ctx, b.ID); !errors.Is(err, sepp.ErrInvalidField) {
		t.Fatalf("a second delete: %v, want INVALID_FIELD", err)
	}
}

// ReadBackupFile reads only the files the manifest lists, a MiB at most per
// call: a path out of the copy's folder, or to a file of the live data
// beside it, is refused.
func TestBackupReadRefusesOtherPaths(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	admin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL)
	res, err := admin.CreateBackup(ctx, &seppv1.CreateBackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetBackupId()
	listed := res.GetManifest().GetFiles()[0].GetPath()
	for _, path := range []string{"", "LOCK", "../LOCK", "../../sepp-acked", "/etc/passwd", "./" + listed, listed + "/..", "..", "../" + listed} {
		_, err := admin.ReadBackupFile(ctx, &seppv1.ReadBackupFileRequest{BackupId: id, Path: path})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "name a path its manifest lists") {
			t.Errorf("path %q: %v, want INVALID_FIELD", path, err)
		}
	}
	for _, bad := range []*seppv1.ReadBackupFileRequest{{BackupId: "../" + id, Path: listed}, {BackupId: "", Path: listed}} {
		if _, err := admin.ReadBackupFile(ctx, bad); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("backup id %q: %v, want NOT_FOUND", bad.BackupId, err)
		}
	}
	if _, err := admin.ReadBackupFile(ctx, &seppv1.ReadBackupFileRequest{BackupId: id, Path: listed, Offset: -1}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("offset -1: %v, want INVALID_FIELD", err)
	}
	got, err := admin.ReadBackupFile(ctx, &seppv1.ReadBackupFileRequest{BackupId: id, Path: listed, MaxBytes: 1 << 30})
	if err != nil || len(got.GetData()) > 1<<20 {
		t.Fatalf("max_bytes 1 GiB: %d bytes, %v; want at most 1 MiB", len(got.GetData()), err)
	}
}

// A copy nobody deleted is removed an hour after it was made, on the
// server's clock.
func TestBackupExpires(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{ClockTimers: true})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := c.CreateBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := b.Manifest.GetFiles()[0].GetPath()
	srv.Clock.Advance(time.Hour - time.Millisecond)
	if _, err := c.ReadBackup(ctx, b.ID, path, &bytes.Buffer{}); err != nil {
		t.Fatalf("read before the hour is up: %v", err)
	}
	srv.Clock.Advance(time.Millisecond) // the expiry fires within Advance
	if _, err := c.ReadBackup(ctx, b.ID, path, &bytes.Buffer{}); !errors.Is(err, sepp.ErrInvalidField) {
		t.Fatalf("read after the hour: %v, want INVALID_FIELD (the copy is gone)", err)
	}
	if !strings.Contains(srv.Logs.String(), "removed a backup nobody deleted") {
		t.Errorf("no log line for the expired copy:\n%s", srv.Logs.String())
	}
}

// An admin token limited to some queues may not copy the store, which holds
// every queue.
func TestBackupLimitedToken(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	ctx := context.Background()
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{Token: paymentsSecret, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateBackup(ctx); !errors.Is(err, sepp.ErrPermissionDenied) || !strings.Contains(err.Error(), "copy the store") {
		t.Fatalf("CreateBackup with a token limited to payments*: %v, want PERMISSION_DENIED", err)
	}

	// An admin token for every queue: CreateBackup and DeleteBackup have an
	// audit line, the reads of the files none.
	admin, err := sepp.NewClient(ctx, srv.URL, sepp.Config{Token: adminSecret, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b, err := admin.CreateBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ReadBackup(ctx, b.ID, b.Manifest.GetFiles()[0].GetPath(), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteBackup(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	logs := srv.Logs.String()
	for _, want := range []string{"token=ops call=sepp.v1.AdminService/CreateBackup", "token=ops call=sepp.v1.AdminService/DeleteBackup", "token=pay call=sepp.v1.AdminService/CreateBackup"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no audit line with %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "ReadBackupFile") {
		t.Errorf("an audit line for ReadBackupFile:\n%s", logs)
	}
}

// On PostgreSQL, CreateBackup is FAILED_PRECONDITION, BACKUP_UNSUPPORTED,
// and the message names PostgreSQL's tools. Needs SEPP_TEST_POSTGRES_URL.
func TestBackupUnsupportedOnPostgres(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, postgres.Options{URL: testserver.PostgresSchema(t, "sepp_backup"), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	srv := testserver.Start(t, testserver.Options{WrapStore: func(store.Store) store.Store { return pg }})
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CreateBackup(ctx)
	var se *sepp.Error
	if !errors.Is(err, sepp.ErrBackupUnsupported) || !errors.As(err, &se) || se.Code != "failed_precondition" || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("CreateBackup on PostgreSQL: %v, want FAILED_PRECONDITION BACKUP_UNSUPPORTED naming pg_dump", err)
	}
}

// The server removes every copy at start (those a server before it left,
// which nobody can fetch: their ids lived in its memory) and at shutdown.
func TestBackupLeftoversRemoved(t *testing.T) {
	var root string
	srv := testserver.Start(t, testserver.Options{WrapStore: func(st store.Store) store.Store {
		b, _ := store.As[store.Backuper](st)
		root = b.BackupRoot()
		if err := os.MkdirAll(filepath.Join(root, "left-by-a-crash"), 0o755); err != nil {
			t.Fatal(err)
		}
		// Registered after the data directory and before the server's
		// shutdown: it runs after the shutdown, before the directory goes.
		t.Cleanup(func() {
			if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
				t.Errorf("after shutdown the backup folder holds %v (%v), want nothing", entries, err)
			}
		})
		return st
	}})
	if _, err := os.Stat(filepath.Join(root, "left-by-a-crash")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a copy left from before the start is still there: %v", err)
	}
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateBackup(context.Background()); err != nil { // not deleted: shutdown removes it
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("the backup folder holds %v, want the one copy", entries)
	}
}
