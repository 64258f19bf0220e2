package pebble

import (
	"sync"

	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// recentRecords holds the dedup records the latest commits wrote, so that a
// retry of a key created a moment ago is judged from memory instead of a
// walk down the memtables' skiplists (on retries of recent keys, most of
// the CPU of answering one). A record enters once the batch that wrote it
// is applied, and leaves, before the batch that deletes it (a release, a
// sweep) is applied, or when maxRecent newer ones have entered. A record
// present is the one stored; an absent key is read from disk. The dedup
// decision treats an expired record as absent either way, and a hit's wait
// for its record's sync is unsynced's, as for a record read from disk.
type recentRecords struct {
	mu    sync.Mutex
	by    map[storerule.Key]storerule.Record
	order []storerule.Key // a ring, oldest at next once full
	next  int
}

// maxRecent bounds recentRecords: about 120 bytes a record plus its key,
// some 2-4 MiB.
const maxRecent = 16384

func (c *recentRecords) put(recs map[storerule.Key]storerule.Record) {
	if len(recs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = make(map[storerule.Key]storerule.Record, maxRecent)
		c.order = make([]storerule.Key, 0, maxRecent)
	}
	for k, r := range recs {
		if _, ok := c.by[k]; ok {
			c.by[k] = r // newer content; its place in the ring stays
			continue
		}
		if len(c.order) < maxRecent {
			c.order = append(c.order, k)
		} else {
			delete(c.by, c.order[c.next])
			c.order[c.next] = k
			c.next = (c.next + 1) % maxRecent
		}
		c.by[k] = r
	}
}

func (c *recentRecords) drop(k storerule.Key) {
	c.mu.Lock()
	delete(c.by, k)
	c.mu.Unlock()
}

func (c *recentRecords) get(k storerule.Key) (storerule.Record, bool) {
	c.mu.Lock()
	r, ok := c.by[k]
	c.mu.Unlock()
	return r, ok
}
