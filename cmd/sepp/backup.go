package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// manifestFile is the name sepp backup writes the manifest under, beside
// the files it lists.
const manifestFile = "manifest.json"

const backupLong = `Copy the embedded store of a running server into DIR, which must be new or
empty. The server makes a consistent copy beside its data while it keeps
serving (hard links to its tables: little space until the files diverge);
sepp backup fetches every file, checks its size and SHA-256, writes
manifest.json, and has the server delete its copy. The copy holds every job
and idempotency key acknowledged before the backup began.

A server on PostgreSQL refuses with BACKUP_UNSUPPORTED: back its database up
with PostgreSQL's own tools. Needs an admin token. --timeout applies to each
call. Restore with sepp restore --from DIR --data PATH, server stopped.`

func backupCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "backup --to DIR", Short: "copy the embedded store of a running server into DIR",
		Long: backupLong, Args: cobra.NoArgs}
	to := cmd.Flags().String("to", "", "the folder to write the backup into: new or empty (required)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if *to == "" {
			return usagef("backup: --to is required: the folder to write the backup into")
		}
		if err := checkEmptyDir(*to); err != nil {
			return usagef("backup: --to %s: %v: a backup goes into a new or empty folder, so it never mixes with other files", *to, err)
		}
		m, err := runBackup(&env.cf, *to)
		if err != nil {
			return err
		}
		if env.cf.json {
			return env.cf.output(env.stdout, m, nil)
		}
		jobs, records := manifestCounts(m)
		_, err = fmt.Fprintf(env.stdout, "backup written to %s: %d files, %s; %d jobs, %d dedup records, %d acknowledged commits (made %s by sepp %s)\n",
			*to, len(m.GetFiles()), pebble.SizeText(uint64(filesSize(m))), jobs, records, m.GetAckedCommits(),
			m.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), m.GetServerVersion())
		return err
	})
	return cmd
}

// checkEmptyDir returns nil when dir does not exist or is an empty folder
// (lost+found, which a new volume's file system holds, does not count).
func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	for _, e := range entries {
		if e.Name() != lostFound {
			return fmt.Errorf("not empty (%s, ...)", e.Name())
		}
	}
	return nil
}

const lostFound = "lost+found"

// runBackup asks the server for a copy, fetches it into dir and has the
// server delete it, whatever happened. A backup that fails leaves dir as it
// found it: what it wrote is removed.
func runBackup(cf *clientFlags, dir string) (m *seppv1.BackupManifest, err error) {
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, cf.timeout)
	c, err := cf.connect(cctx)
	cancel()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cctx, cancel = context.WithTimeout(ctx, cf.timeout)
	b, err := c.CreateBackup(cctx)
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(ctx, cf.timeout)
		defer cancel()
		if derr := c.DeleteBackup(dctx, b.ID); derr != nil {
			// The server removes it within the hour anyway.
			err = errors.Join(err, fmt.Errorf("the server could not delete its copy %s (it removes it within the hour): %w", b.ID, derr))
		}
	}()
	existed := true
	if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
		existed = false
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := fetchBackup(ctx, cf, c, b, dir); err != nil {
		return nil, errors.Join(err, clearDir(dir, existed))
	}
	return b.Manifest, nil
}

// fetchBackup writes every file of b into dir, checked against the
// manifest, then the manifest itself, last: a folder without manifest.json
// is never taken for a backup.
func fetchBackup(ctx context.Context, cf *clientFlags, c *sepp.Client, b *sepp.Backup, dir string) error {
	if b.Manifest.GetFormat() != store.BackupFormat {
		return fmt.Errorf("the server made a backup of format %q; this sepp reads %s: use the sepp of the server's version", b.Manifest.GetFormat(), store.BackupFormat)
	}
	for _, f := range b.Manifest.GetFiles() {
		// A call per MiB, each given --timeout.
		timeout := cf.timeout * time.Duration(1+f.GetSize()>>20)
		fctx, cancel := context.WithTimeout(ctx, timeout)
		err := fetchFile(fctx, c, b.ID, f, dir)
		cancel()
		if err != nil {
			return err
		}
	}
	b2, err := protoJSON(b.Manifest)
	if err != nil {
		return err
	}
	if _, _, err := writeHashed(filepath.Join(dir, manifestFile), func(w io.Writer) (int64, error) {
		n, err := w.Write(b2)
		return int64(n), err
	}); err != nil {
		return err
	}
	return pebble.SyncDir(dir)
}

func fetchFile(ctx context.Context, c *sepp.Client, id string, f *seppv1.BackupFile, dir string) error {
	path, err := localPath(dir, f.GetPath())
	if err != nil {
		return err
	}
	n, sum, err := writeHashed(path, func(w io.Writer) (int64, error) { return c.ReadBackup(ctx, id, f.GetPath(), w) })
	if err != nil {
		return fmt.Errorf("fetch %s: %w", f.GetPath(), err)
	}
	if n != f.GetSize() || sum != f.GetSha256() {
		return fmt.Errorf("%s arrived as %d bytes with SHA-256 %s, the server's manifest says %d bytes, %s: run sepp backup again", f.GetPath(), n, sum, f.GetSize(), f.GetSha256())
	}
	return nil
}

// localPath is the manifest's path p under dir, refused if it would leave
// dir: a manifest never names such a path, from a server or on disk.
func localPath(dir, p string) (string, error) {
	clean := filepath.FromSlash(p)
	if p == "" || filepath.IsAbs(clean) || !filepath.IsLocal(clean) || p == manifestFile {
		return "", &backupRefused{fmt.Sprintf("the manifest names the file %q, which is not a path inside the backup", p)}
	}
	return filepath.Join(dir, clean), nil
}

// clearDir removes what a failed backup wrote: dir itself when it made it,
// its contents when dir was an empty folder before.
func clearDir(dir string, existed bool) error {
	if !existed {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// writeHashed creates the file at path, which must not exist, and its
// folders, with what fill writes, synced; it returns the file's size and
// SHA-256 (lowercase hex).
func writeHashed(path string, fill func(io.Writer) (int64, error)) (n int64, sum string, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, "", err
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err = fill(io.MultiWriter(out, h))
	if err == nil {
		err = out.Sync()
	}
	if err = errors.Join(err, out.Close()); err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func manifestCounts(m *seppv1.BackupManifest) (jobs, records int64) {
	for _, q := range m.GetQueues() {
		jobs += q.GetScheduled() + q.GetAvailable() + q.GetReserved() + q.GetCompleted() + q.GetDead() + q.GetCancelled()
		records += q.GetDedupRecords()
	}
	return jobs, records
}

func filesSize(m *seppv1.BackupManifest) int64 {
	var n int64
	for _, f := range m.GetFiles() {
		n += f.GetSize()
	}
	return n
}

// backupRefused is a restore's refusal of the backup itself: not a backup,
// incomplete, or damaged (exit status 6).
type backupRefused struct{ msg string }

func (e *backupRefused) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &backupRefused{fmt.Sprintf(format, args...)}
}

const restoreLong = `Restore a backup that sepp backup wrote into DIR as the embedded store's data
directory PATH, with no server running (this command needs none). It checks
the backup first: manifest.json of the format sepp-backup/1, every file it
lists there with its size and SHA-256, and no other file. A folder that is no
backup, an incomplete one or a damaged one is refused (exit status 6) and
nothing is written.

The files are copied into a new folder beside PATH and synced, the store is
opened there once to check that it opens clean and holds what the manifest
counts, and only then is the folder renamed to PATH: a restore that fails
leaves nothing half made. PATH must be new or empty; with --force, a PATH
that holds files is moved aside to PATH.replaced-TIME first, never deleted
(refused while a server holds it). A PATH that is the root of a volume (the
container image's /data) cannot be renamed: the new folder is made inside
it, what it held goes to PATH/.replaced-TIME, and the restored files are
moved into place. Then start sepp serve on PATH.

What was acknowledged after the backup began is not in it.`

func restoreCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "restore --from DIR --data PATH [--force]", Short: "restore a backup as the embedded store's data directory (server stopped)",
		Long: restoreLong, Args: cobra.NoArgs}
	from := cmd.Flags().String("from", "", "the folder sepp backup wrote (required)")
	data := cmd.Flags().String("data", "", "the data directory to restore into: new or empty, unless --force (required)")
	force := cmd.Flags().Bool("force", false, "move a PATH that holds files aside to PATH.replaced-TIME first")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		switch {
		case *from == "":
			return usagef("restore: --from is required: the folder sepp backup wrote")
		case *data == "":
			return usagef("restore: --data is required: the data directory to restore into")
		}
		if err := checkEmptyDir(*data); err != nil && !*force {
			return usagef("restore: --data %s: %v: restore into a new or empty folder, or pass --force to move this one aside first", *data, err)
		}
		r, err := runRestore(cmd.Context(), *from, *data)
		if err != nil {
			return err
		}
		return r.print(env.stdout, *data)
	})
	return cmd
}

// restored is what a restore did, for its report.
type restored struct {
	m       *seppv1.BackupManifest
	jobs    int64
	records int64
	queues  int
	aside   string // where the data PATH held went, or ""
}

func (r *restored) print(w io.Writer, data string) error {
	_, err := fmt.Fprintf(w, "restored the backup made %s by sepp %s into %s: %d files, %s\nthe store opened clean: %d jobs, %d dedup records in %d %s, as the manifest counts\n",
		r.m.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), r.m.GetServerVersion(), data, len(r.m.GetFiles()), pebble.SizeText(uint64(filesSize(r.m))), r.jobs, r.records, r.queues, plural(int64(r.queues), "queue"))
	if err == nil && r.aside != "" {
		_, err = fmt.Fprintf(w, "what %s held before was moved to %s\n", data, r.aside)
	}
	return err
}

func runRestore(ctx context.Context, from, data string) (*restored, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m, err := readBackupManifest(from)
	if err != nil {
		return nil, err
	}
	data = filepath.Clean(data)
	// A data directory that holds files is locked before anything is
	// copied, so that one a server runs on is refused at once, and stays
	// locked until it has been moved aside.
	hadFiles := checkEmptyDir(data) != nil
	if hadFiles {
		lock, err := pebble.LockData(data)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		defer lock.Close()
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	// The restore is made on the data directory's file system, so that it
	// is renamed into place: beside it, or inside it when it is the root of
	// a volume, which cannot be renamed.
	inPlace := isMountPoint(data)
	tmp := filepath.Join(filepath.Dir(data), "."+filepath.Base(data)+".restoring-"+hex.EncodeToString(suffix[:]))
	if inPlace {
		tmp = filepath.Join(data, ".restoring-"+hex.EncodeToString(suffix[:]))
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("restore: make %s beside the data directory: %w", tmp, err)
	}
	r, err := restoreInto(ctx, m, from, tmp)
	switch {
	case err == nil && inPlace:
		r.aside, err = replaceInPlace(tmp, data, hadFiles)
	case err == nil:
		r.aside, err = replaceData(tmp, data)
	}
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmp))
	}
	return r, nil
}

// readBackupManifest reads DIR's manifest and checks that DIR holds exactly
// the files it lists, with their sizes (their SHA-256 is checked as they
// are copied).
func readBackupManifest(dir string) (*seppv1.BackupManifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return nil, refusef("restore: --from %s: no such folder", dir)
		} else if serr != nil {
			return nil, refusef("restore: --from %s: %v", dir, serr)
		}
		return nil, refusef("restore: %s has no %s: it is not a backup sepp backup wrote (or its fetch did not finish)", dir, manifestFile)
	}
	if err != nil {
		return nil, err
	}
	m := &seppv1.BackupManifest{}
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, refusef("restore: %s in %s is not a backup manifest: %v", manifestFile, dir, err)
	}
	if m.GetFormat() != store.BackupFormat {
		return nil, refusef("restore: the backup in %s has the format %q; this sepp reads %s", dir, m.GetFormat(), store.BackupFormat)
	}
	listed := map[string]int64{}
	for _, f := range m.GetFiles() {
		if _, err := localPath(dir, f.GetPath()); err != nil {
			return nil, refusef("restore: %v", err)
		}
		listed[f.GetPath()] = f.GetSize()
	}
	var missing, extra, resized []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		size, ok := listed[rel]
		switch {
		case rel == manifestFile:
		case !ok:
			extra = append(extra, rel)
		default:
			info, err := d.Info()
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || info.Size() != size {
				resized = append(resized, fmt.Sprintf("%s (%d bytes, the manifest says %d)", rel, info.Size(), size))
			}
			delete(listed, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for p := range listed {
		missing = append(missing, p)
	}
	slices.Sort(missing)
	switch {
	case len(missing) > 0:
		return nil, refusef("restore: the backup in %s is incomplete: %s its manifest lists %s missing (%s); restore another backup", dir, fmt.Sprintf("%d %s", len(missing), plural(int64(len(missing)), "file")), isAre(len(missing)), strings.Join(missing, ", "))
	case len(extra) > 0:
		return nil, refusef("restore: %s holds %s its manifest does not list (%s): it is not a backup as sepp backup writes it, or something was added to it; restore from a folder holding the backup alone", dir, fmt.Sprintf("%d %s", len(extra), plural(int64(len(extra)), "file")), strings.Join(extra, ", "))
	case len(resized) > 0:
		return nil, refusef("restore: the backup in %s is damaged: %s; restore another backup", dir, strings.Join(resized, ", "))
	}
	return m, nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// restoreInto copies the backup's files into tmp, checking each one's
// SHA-256 as it goes, syncs them, and opens the store there once: it must
// open with nothing reported damaged or lost, and hold what the manifest
// counts.
func restoreInto(ctx context.Context, m *seppv1.BackupManifest, from, tmp string) (*restored, error) {
	for _, f := range m.GetFiles() {
		if err := copyChecked(from, tmp, f); err != nil {
			return nil, err
		}
	}
	if err := pebble.SyncDir(tmp); err != nil {
		return nil, err
	}
	st, err := pebble.Open(ctx, pebble.Options{Path: tmp})
	if err != nil {
		return nil, refusef("restore: the backup in %s does not open as a store: %v", from, err)
	}
	r, err := checkRestored(ctx, st, m, from)
	return r, errors.Join(err, st.Close())
}

func checkRestored(ctx context.Context, st *pebble.Store, m *seppv1.BackupManifest, from string) (*restored, error) {
	if damaged := st.Recovery().Damaged; len(damaged) > 0 {
		return nil, refusef("restore: the backup in %s opens with damage: %s; restore another backup", from, strings.Join(damaged, "; "))
	}
	// The manifest's counts were taken at its created_at: the same clock
	// gives the same counts of the same data.
	stats, err := st.ListQueues(ctx, &store.ListQueuesParams{Now: m.GetCreatedAt().AsTime()})
	if err != nil {
		return nil, err
	}
	r := &restored{m: m, queues: len(stats)}
	got := map[string][2]int64{}
	for _, q := range stats {
		var jobs int64
		for _, n := range q.Counts {
			jobs += n
		}
		got[q.Name] = [2]int64{jobs, q.DedupRecords}
		r.jobs += jobs
		r.records += q.DedupRecords
	}
	for _, q := range m.GetQueues() {
		jobs := q.GetScheduled() + q.GetAvailable() + q.GetReserved() + q.GetCompleted() + q.GetDead() + q.GetCancelled()
		if g := got[q.GetName()]; g != [2]int64{jobs, q.GetDedupRecords()} {
			return nil, refusef("restore: the backup in %s holds %d jobs and %d dedup records on queue %s, its manifest %d and %d: it is damaged; restore another backup",
				from, g[0], g[1], q.GetName(), jobs, q.GetDedupRecords())
		}
		delete(got, q.GetName())
	}
	for name := range got {
		return nil, refusef("restore: the backup in %s holds queue %s, which its manifest does not list: it is damaged; restore another backup", from, name)
	}
	return r, nil
}

// copyChecked copies the file f of the backup in from into to, synced, and
// refuses it when its SHA-256 is not the manifest's.
func copyChecked(from, to string, f *seppv1.BackupFile) error {
	src, err := localPath(from, f.GetPath())
	if err != nil {
		return err
	}
	dst, _ := localPath(to, f.GetPath())
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, sum, err := writeHashed(dst, func(w io.Writer) (int64, error) { return io.Copy(w, in) })
	if err != nil {
		return err
	}
	if sum != f.GetSha256() {
		return refusef("restore: the backup is damaged: %s has the SHA-256 %s, its manifest says %s; restore another backup", f.GetPath(), sum, f.GetSha256())
	}
	return nil
}

// replaceInPlace moves the restored files from tmp, a folder inside data
// (the root of a volume), up into data, after moving what data held, if
// anything, into data/.replaced-TIME; it returns that folder. Unlike a
// rename this is not one step, so the order is chosen for a crash part-way:
// Pebble's marker files leave data last and come back first, so a data
// directory caught in between names a MANIFEST whose files are missing,
// which the store refuses to open, and is never taken for a new, empty
// store. lost+found stays where it is.
func replaceInPlace(tmp, data string, hadFiles bool) (aside string, err error) {
	if hadFiles {
		aside = filepath.Join(data, ".replaced-"+time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Mkdir(aside, 0o755); err != nil {
			return "", fmt.Errorf("restore: make %s: %w", aside, err)
		}
		if err := moveEntries(data, aside, false, filepath.Base(tmp), filepath.Base(aside), lostFound); err != nil {
			return aside, fmt.Errorf("restore: move what %s held into %s: %w", data, aside, err)
		}
		if err := pebble.SyncDir(aside); err != nil {
			return aside, err
		}
	}
	if err := moveEntries(tmp, data, true); err != nil {
		return aside, fmt.Errorf("restore: move the restored files from %s into %s: %w", tmp, data, err)
	}
	if err := os.Remove(tmp); err != nil {
		return aside, err
	}
	return aside, pebble.SyncDir(data)
}

// moveEntries renames every entry of from into to but those named in skip,
// Pebble's marker files first or last.
func moveEntries(from, to string, markersFirst bool, skip ...string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	isMarker := func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "marker.") }
	slices.SortStableFunc(entries, func(a, b os.DirEntry) int {
		ma, mb := isMarker(a), isMarker(b)
		switch {
		case ma == mb:
			return 0
		case ma == markersFirst:
			return -1
		}
		return 1
	})
	for _, e := range entries {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// replaceData renames the restored folder tmp to data. A data directory
// that holds files (locked by the caller, so no server runs on it) is first
// moved aside; it returns where it went.
func replaceData(tmp, data string) (aside string, err error) {
	if checkEmptyDir(data) != nil {
		aside = data + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(data, aside); err != nil {
			return "", fmt.Errorf("restore: move %s aside: %w", data, err)
		}
	}
	// An empty folder at data is replaced by the rename.
	if err := os.Rename(tmp, data); err != nil {
		if aside != "" { // put the old data back where it was
			err = errors.Join(err, os.Rename(aside, data))
		}
		return "", fmt.Errorf("restore: rename %s to %s: %w", tmp, data, err)
	}
	return aside, pebble.SyncDir(filepath.Dir(data))
}
