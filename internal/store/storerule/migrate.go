package storerule

import (
	"fmt"
	"io/fs"
	"sort"

	"github.com/sepp-dev/sepp/internal/store"
)

// Migration is one schema migration a binary carries: a file named with a
// 4-digit version, e.g. 0002_leases.sql.
type Migration struct {
	Version int
	Name    string
}

// Migrations lists the migrations in dir of fsys, by version. Every file name
// must start with a distinct 4-digit version.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(entries))
	seen := map[int]string{}
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%04d_", &v); err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q: name must start with a 4-digit version above 0000", e.Name())
		}
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("migration files %q and %q have the same version", other, e.Name())
		}
		seen[v] = e.Name()
		out = append(out, Migration{Version: v, Name: e.Name()})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Version < out[b].Version })
	return out, nil
}

// Pending returns the migrations of known that a store whose newest applied
// version is applied (0: none) still needs, in order. A store whose schema
// is newer than every migration the binary knows was written by a newer
// sepp: Pending refuses it with store.ErrSchemaTooNew, on every backend,
// rather than let an old binary write data it may not understand.
func Pending(known []Migration, applied int) ([]Migration, error) {
	newest := 0
	if len(known) > 0 {
		newest = known[len(known)-1].Version
	}
	if applied > newest {
		return nil, fmt.Errorf("%w: the data is at schema version %d, this binary knows up to %d: upgrade sepp",
			store.ErrSchemaTooNew, applied, newest)
	}
	var out []Migration
	for _, m := range known {
		if m.Version > applied {
			out = append(out, m)
		}
	}
	return out, nil
}
