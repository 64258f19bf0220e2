package sepp

import (
	"context"
	"fmt"
	"io"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// Backup is a copy of the server's embedded store, made by CreateBackup and
// kept on the server until DeleteBackup (or an hour).
type Backup struct {
	// ID names the copy in ReadBackup and DeleteBackup.
	ID string
	// Manifest describes the copy: its format, what it holds, and every
	// file with its size and SHA-256. sepp backup writes it as
	// manifest.json (protojson) beside the files.
	Manifest *seppv1.BackupManifest
}

// CreateBackup makes a consistent copy of the server's embedded store while
// it serves. It fails with ErrBackupUnsupported on the PostgreSQL backend.
// Role admin.
func (c *Client) CreateBackup(ctx context.Context) (*Backup, error) {
	res, err := c.admin.CreateBackup(ctx, &seppv1.CreateBackupRequest{})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	return &Backup{ID: res.GetBackupId(), Manifest: res.GetManifest()}, nil
}

// ReadBackup writes the file path of backup id (a path its manifest lists)
// to w, a call per MiB, and returns the bytes written.
func (c *Client) ReadBackup(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	var off int64
	for {
		res, err := c.admin.ReadBackupFile(ctx, &seppv1.ReadBackupFileRequest{BackupId: id, Path: path, Offset: off})
		if err != nil {
			return off, fromRPC(ctx, err)
		}
		n, err := w.Write(res.GetData())
		off += int64(n)
		if err != nil {
			return off, err
		}
		if res.GetEof() {
			return off, nil
		}
		if len(res.GetData()) == 0 { // a server that sends nothing and no end would loop forever
			return off, fmt.Errorf("sepp: reading %s of backup %s: the server sent no data at offset %d and no end of file", path, id, off)
		}
	}
}

// DeleteBackup removes backup id from the server.
func (c *Client) DeleteBackup(ctx context.Context, id string) error {
	if _, err := c.admin.DeleteBackup(ctx, &seppv1.DeleteBackupRequest{BackupId: id}); err != nil {
		return fromRPC(ctx, err)
	}
	return nil
}
