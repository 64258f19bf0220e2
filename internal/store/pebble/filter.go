package pebble

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// keyFilter is a Bloom filter of the (queue, key) names of the dedup records
// in the store, kept by the commits. Most enqueued keys are new, and a lookup
// of a key that is not there walks the memtable's skiplist to the bottom:
// measured, that was the largest single cost of an enqueue. A key the filter
// has never seen is certainly absent, and its lookup is skipped.
//
// The filter never forgets, so released, swept and replaced records stay in
// it as false positives; it is rebuilt from the records (a scan) when it has
// taken in as many names as it was sized for, at 10 bits a name, and at
// Open. Only a group being applied (under writeMu) adds to it; the enqueue path for dedup hits
// (enqueueHits) reads it concurrently, so its words are atomic.
type keyFilter struct {
	seed  maphash.Seed
	bits  []atomic.Uint64
	mask  uint64 // len(bits)*64 - 1
	added int
	limit int // names the filter was sized for
}

// minFilterNames is the smallest filter: 1 Mi names, 1.25 MiB.
const minFilterNames = 1 << 20

// filterProbes is the number of bits each name sets: about 1% false
// positives at 10 bits a name.
const filterProbes = 7

func newKeyFilter(names int) *keyFilter {
	limit := max(minFilterNames, 1<<bits.Len(uint(2*names)))
	words := limit * 10 / 64
	words = 1 << bits.Len(uint(words-1)) // a power of two, for the mask
	return &keyFilter{seed: maphash.MakeSeed(), bits: make([]atomic.Uint64, words), mask: uint64(words*64 - 1), limit: limit}
}

func (f *keyFilter) hash(name []byte) (uint64, uint64) {
	h := maphash.Bytes(f.seed, name)
	return h, h>>33 | h<<31 | 1
}

func (f *keyFilter) add(name []byte) {
	if f == nil {
		return
	}
	h, d := f.hash(name)
	for range filterProbes {
		f.bits[(h&f.mask)/64].Or(1 << (h & 63))
		h += d
	}
	f.added++
}

// mayContain reports false only for a name never added. A nil filter (one
// that could not be rebuilt) knows nothing, and says true.
func (f *keyFilter) mayContain(name []byte) bool {
	if f == nil {
		return true
	}
	h, d := f.hash(name)
	for range filterProbes {
		if f.bits[(h&f.mask)/64].Load()&(1<<(h&63)) == 0 {
			return false
		}
		h += d
	}
	return true
}

func (f *keyFilter) full() bool { return f != nil && f.added >= f.limit }

// buildKeyFilter scans the dedup records of db into a new filter sized for
// twice as many: one pass counts them, the next adds them.
func buildKeyFilter(db pebble.Reader) (*keyFilter, error) {
	n := 0
	if err := scan(db, []byte{kindDedup}, func([]byte, []byte) error { n++; return nil }); err != nil {
		return nil, err
	}
	f := newKeyFilter(n)
	err := scan(db, []byte{kindDedup}, func(k, _ []byte) error {
		f.add(k[1:])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}
