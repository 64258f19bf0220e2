package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// runSepp runs the real binary with args and returns its output (stdout and
// stderr) and exit status.
func runSepp(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("run sepp %v: %v", args, err)
	return "", 0
}

// TestBackupRestoreUnderLoad is the acceptance test of sepp backup and sepp
// restore: while 32 producers enqueue keyed jobs into a real server, sepp
// backup copies its store; the copy, restored into a new data directory
// and served, holds every job acknowledged before the backup was started,
// with its key (a retry of each key is a dedup hit that names the same
// job), and the store opens with nothing reported damaged or lost.
func TestBackupRestoreUnderLoad(t *testing.T) {
	skipShort(t)
	const producers = 32
	bin := buildSepp(t)
	src := startNode(t, bin, t.TempDir(), nil)
	ctx := context.Background()
	c, err := sepp.Connect(ctx, "http://"+src.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var (
		mu    sync.Mutex
		acked = map[string]string{} // key -> job id
		prog  progress
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("p%02d-%06d", p, i)
				res, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "orders", JobType: "ship", IdempotencyKey: sepp.Key(key),
					Payload: []byte(`{"order":"` + key + `"}`)})
				if err != nil {
					t.Errorf("enqueue %s: %v", key, err)
					return
				}
				mu.Lock()
				acked[key] = res.JobID
				mu.Unlock()
				prog.add()
			}
		}()
	}
	await(t, prog.after(2000), "2,000 acknowledged enqueues before the backup")
	mu.Lock()
	before := make(map[string]string, len(acked))
	for k, id := range acked {
		before[k] = id
	}
	mu.Unlock()
	during := prog.after(500) // the load goes on while the backup runs
	dir := filepath.Join(t.TempDir(), "backup")
	out, code := runSepp(t, bin, "backup", "--to", dir, "--addr", "http://"+src.addr)
	await(t, during, "500 more enqueues after the backup began")
	close(stop)
	wg.Wait()
	if code != 0 || !strings.HasPrefix(out, "backup written to "+dir+": ") {
		t.Fatalf("sepp backup: exit %d\n%s", code, out)
	}
	t.Logf("sepp backup, under the load of %d producers: %s", producers, strings.TrimSpace(out))
	if entries, err := os.ReadDir(filepath.Join(src.data, pebble.BackupDir)); err != nil || len(entries) != 0 {
		t.Errorf("the server kept copies after sepp backup deleted its own: %v %v", entries, err)
	}
	src.signal(syscall.SIGTERM)

	data := filepath.Join(t.TempDir(), "restored")
	out, code = runSepp(t, bin, "restore", "--from", dir, "--data", data)
	if code != 0 || !strings.Contains(out, "the store opened clean: ") {
		t.Fatalf("sepp restore: exit %d\n%s", code, out)
	}
	t.Logf("sepp restore: %s", strings.TrimSpace(out))

	dst := startNode(t, bin, data, nil)
	c2, err := sepp.Connect(ctx, "http://"+dst.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for key, id := range before {
		res, err := c2.Enqueue(ctx, sepp.EnqueueRequest{Queue: "orders", JobType: "ship", IdempotencyKey: sepp.Key(key),
			Payload: []byte(`{"order":"` + key + `"}`)})
		if err != nil {
			t.Fatalf("retry of %s on the restored server: %v", key, err)
		}
		if !res.Deduplicated || res.JobID != id {
			t.Fatalf("key %s, acknowledged as job %s before the backup: the restored server answers job %s, deduplicated %v", key, id, res.JobID, res.Deduplicated)
		}
		if _, err := c2.GetJob(ctx, id); err != nil {
			t.Fatalf("job %s of key %s on the restored server: %v", id, key, err)
		}
	}
	t.Logf("%d keys acknowledged before the backup: each job and its key restored", len(before))
	dst.signal(syscall.SIGTERM)
	st, err := pebble.Open(ctx, pebble.Options{Path: data})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if d := st.Recovery().Damaged; len(d) != 0 {
		t.Fatalf("the restored store reports damage: %q", d)
	}
}

// TestRestoreRefusals: sepp restore refuses a folder that is no backup, an
// incomplete backup and a damaged one, each with its message and exit status
// 6, and writes nothing; and a data directory that holds files, without
// --force.
func TestRestoreRefusals(t *testing.T) {
	skipShort(t)
	bin := buildSepp(t)
	ctx := context.Background()
	// A server restarted once holds its jobs in a table file (.sst), not
	// only in its write-ahead log.
	data := t.TempDir()
	srv := startNode(t, bin, data, nil)
	c, err := sepp.Connect(ctx, "http://"+srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("k", i))}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	srv.signal(syscall.SIGTERM)
	srv = startNode(t, bin, data, nil)
	good := filepath.Join(t.TempDir(), "good")
	if out, code := runSepp(t, bin, "backup", "--to", good, "--addr", "http://"+srv.addr); code != 0 {
		t.Fatalf("sepp backup: exit %d\n%s", code, out)
	}
	ssts, _ := filepath.Glob(filepath.Join(good, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("the backup holds no .sst file")
	}
	if out, code := runSepp(t, bin, "backup", "--to", good, "--addr", "http://"+srv.addr); code != 2 || !strings.Contains(out, "not empty") {
		t.Errorf("sepp backup into a folder that holds a backup: exit %d, want 2\n%s", code, out)
	}

	variant := func(change func(dir string)) string {
		dir := filepath.Join(t.TempDir(), "variant")
		if err := os.CopyFS(dir, os.DirFS(good)); err != nil {
			t.Fatal(err)
		}
		change(dir)
		return dir
	}
	sst := filepath.Base(ssts[0])
	for _, c := range []struct {
		name string
		dir  string
		want string
	}{
		{"a byte flipped in a table file", variant(func(dir string) {
			b, err := os.ReadFile(filepath.Join(dir, sst))
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(filepath.Join(dir, sst), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}), "the backup is damaged: " + sst + " has the SHA-256 "},
		{"a file missing", variant(func(dir string) { os.Remove(filepath.Join(dir, sst)) }),
			"is incomplete: 1 file its manifest lists is missing (" + sst + ")"},
		{"a file cut short", variant(func(dir string) { os.Truncate(filepath.Join(dir, sst), 10) }),
			"is damaged: " + sst + " (10 bytes, the manifest says"},
		{"a file added", variant(func(dir string) { os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644) }),
			"holds 1 file its manifest does not list (notes.txt)"},
		{"another format", variant(func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, manifestFile))
			os.WriteFile(filepath.Join(dir, manifestFile), bytes.Replace(b, []byte("sepp-backup/1"), []byte("sepp-backup/9"), 1), 0o644)
		}), `has the format "sepp-backup/9"; this sepp reads sepp-backup/1`},
		{"a folder that is no backup", variant(func(dir string) { os.Remove(filepath.Join(dir, manifestFile)) }),
			"has no manifest.json: it is not a backup sepp backup wrote"},
		{"a data directory", data, "has no manifest.json"},
	} {
		target := filepath.Join(t.TempDir(), "data")
		out, code := runSepp(t, bin, "restore", "--from", c.dir, "--data", target)
		if code != 6 || !strings.Contains(out, c.want) {
			t.Errorf("restore from %s: exit %d, want 6 and %q:\n%s", c.name, code, c.want, out)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("restore from %s left %s behind (%v)", c.name, target, err)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(target), ".data.restoring-*")); len(left) > 0 {
			t.Errorf("restore from %s left %v behind", c.name, left)
		}
	}

	// A data directory that holds files: refused without --force, locked
	// while a server runs on it, moved aside with --force once it stopped.
	out, code := runSepp(t, bin, "restore", "--from", good, "--data", data)
	if code != 2 || !strings.Contains(out, "pass --force") {
		t.Errorf("restore over a data directory without --force: exit %d, want 2\n%s", code, out)
	}
	out, code = runSepp(t, bin, "restore", "--from", good, "--data", data, "--force")
	if code != 1 || !strings.Contains(out, "is in use by process") {
		t.Errorf("restore --force over the data directory of a running server: exit %d, want 1 naming the server\n%s", code, out)
	}
	srv.signal(syscall.SIGTERM)
	out, code = runSepp(t, bin, "restore", "--from", good, "--data", data, "--force")
	if code != 0 || !strings.Contains(out, "what "+data+" held before was moved to "+data+".replaced-") {
		t.Fatalf("restore --force over a stopped server's data: exit %d\n%s", code, out)
	}
	aside, _ := filepath.Glob(data + ".replaced-*")
	if len(aside) != 1 {
		t.Fatalf("the old data directory was not kept aside: %v", aside)
	}
	if _, err := os.Stat(filepath.Join(aside[0], pebble.AckMarkFile)); err != nil {
		t.Errorf("the data set aside lacks its files: %v", err)
	}
}

// TestRestoreIntoMountPoint: a data directory that is the root of a volume
// (the container image's /data) cannot be renamed; sepp restore fills it
// instead, moving what it held into .replaced-TIME inside it, and leaves
// lost+found alone. The restored store opens clean there.
func TestRestoreIntoMountPoint(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs, which takes root (CI runs this as root)")
	}
	bin := buildSepp(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { // before t.TempDir removes mnt
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	if err := os.Mkdir(filepath.Join(mnt, lostFound), 0o700); err != nil {
		t.Fatal(err)
	}
	// The volume's own store, with one job, stopped.
	srv := startNode(t, bin, mnt, nil)
	ctx := context.Background()
	c, err := sepp.Connect(ctx, "http://"+srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "old", JobType: "t", IdempotencyKey: sepp.Key("old")}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.signal(syscall.SIGTERM)

	// A backup of another server, with other jobs.
	other := startNode(t, bin, t.TempDir(), nil)
	c, err = sepp.Connect(ctx, "http://"+other.addr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "new", JobType: "t", IdempotencyKey: sepp.Key("new")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	dir := filepath.Join(t.TempDir(), "backup")
	if out, code := runSepp(t, bin, "backup", "--to", dir, "--addr", "http://"+other.addr); code != 0 {
		t.Fatalf("sepp backup: exit %d\n%s", code, out)
	}

	out, code := runSepp(t, bin, "restore", "--from", dir, "--data", mnt, "--force")
	if code != 0 || !strings.Contains(out, "was moved to "+filepath.Join(mnt, ".replaced-")) {
		t.Fatalf("sepp restore into a mount point: exit %d\n%s", code, out)
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if strings.HasPrefix(e.Name(), ".restoring-") {
			t.Errorf("the restore left %s behind", e.Name())
		}
	}
	if !slices.Contains(names, lostFound) {
		t.Errorf("lost+found was moved: %v", names)
	}
	aside, _ := filepath.Glob(filepath.Join(mnt, ".replaced-*", pebble.AckMarkFile))
	if len(aside) != 1 {
		t.Errorf("the volume's old store was not kept in .replaced-*: %v", names)
	}
	st, err := pebble.Open(ctx, pebble.Options{Path: mnt})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if d := st.Recovery().Damaged; len(d) != 0 {
		t.Fatalf("the restored store reports damage: %q", d)
	}
	got, err := st.LookupDedup(ctx, &store.LookupDedupParams{Queue: "new", Key: "new", Now: time.Now()})
	if err != nil || got == nil || hex.EncodeToString(got.Record.JobID[:]) != strings.ReplaceAll(res.JobID, "-", "") {
		t.Fatalf("key new on the restored volume: %+v, %v; want job %s", got, err, res.JobID)
	}
	if got, err := st.LookupDedup(ctx, &store.LookupDedupParams{Queue: "old", Key: "old", Now: time.Now()}); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("the volume's old key is still served: %+v, %v", got, err)
	}
}
