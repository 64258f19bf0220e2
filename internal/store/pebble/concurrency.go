package pebble

import (
	"encoding/binary"
	"errors"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// Per-key concurrency, as storerule.Admits and storerule.KeepsSlot decide
// it. A key's count is stored under 'k', its waiting jobs under 'w'; a job
// record says whether it holds a slot (Slot) or waits (Waiting). Every
// method that changes a record's Slot or Waiting writes the record.

func (t *tx) keyCount(queue, ckey string) (storerule.KeyCount, error) {
	v, ok, err := get(t.b, concCountKey(queue, ckey))
	if err != nil || !ok {
		return storerule.KeyCount{}, err
	}
	d := decoder{b: v}
	n := storerule.KeyCount{Active: d.int(), Waiting: d.int()}
	return n, d.err
}

// putKeyCount writes a key's count; a key with no slot held and no job
// waiting keeps nothing.
func (t *tx) putKeyCount(queue, ckey string, n storerule.KeyCount) error {
	k := concCountKey(queue, ckey)
	if n.Active <= 0 && n.Waiting <= 0 {
		return t.del(k)
	}
	b := binary.AppendVarint(nil, n.Active)
	return t.set(k, binary.AppendVarint(b, n.Waiting))
}

// arrive admits the ordered job r, which has become deliverable, to a slot
// of its key, or puts it in the key's waiting list. It reports whether r
// was admitted (the caller then indexes it as usual).
func (t *tx) arrive(r *record) (bool, error) {
	n, err := t.keyCount(r.Queue, r.Conc.Key)
	if err != nil {
		return false, err
	}
	if storerule.Admits(r.Conc, n) {
		r.Slot = true
		n.Active++
		if err := t.putKeyCount(r.Queue, r.Conc.Key, n); err != nil {
			return false, err
		}
		return true, t.putJob(r)
	}
	return false, t.wait(r, n)
}

// wait puts r, in no index, in its key's waiting list; n is the key's count.
func (t *tx) wait(r *record, n storerule.KeyCount) error {
	r.Waiting = true
	n.Waiting++
	if err := t.putKeyCount(r.Queue, r.Conc.Key, n); err != nil {
		return err
	}
	if err := t.setIndex(concWaitPrefix(r.Queue, r.Conc.Key), concWaitKey(r), nil); err != nil {
		return err
	}
	return t.putJob(r)
}

// leaveWaiting takes the waiting r out of its key's waiting list (it is
// cancelled, or its payload is replaced and it arrives again).
func (t *tx) leaveWaiting(r *record) error {
	n, err := t.keyCount(r.Queue, r.Conc.Key)
	if err != nil {
		return err
	}
	r.Waiting = false
	n.Waiting--
	if err := t.del(concWaitKey(r)); err != nil {
		return err
	}
	if err := t.putKeyCount(r.Queue, r.Conc.Key, n); err != nil {
		return err
	}
	return t.putJob(r)
}

// takeSlot gives the unordered r, which Reserve reached, a slot of its key,
// or, when none is free, puts it in the waiting list (the caller has taken
// it off the ready index). It reports whether r took a slot.
func (t *tx) takeSlot(r *record) (bool, error) {
	n, err := t.keyCount(r.Queue, r.Conc.Key)
	if err != nil {
		return false, err
	}
	if !storerule.Admits(r.Conc, n) {
		return false, t.wait(r, n)
	}
	r.Slot = true
	n.Active++
	return true, t.putKeyCount(r.Queue, r.Conc.Key, n)
}

// releaseSlot frees r's slot, at now, and admits the first job waiting for
// one, which enters the index its run-at puts it in.
func (t *tx) releaseSlot(r *record, now int64) error {
	r.Slot = false
	n, err := t.keyCount(r.Queue, r.Conc.Key)
	if err != nil {
		return err
	}
	n.Active--
	if n.Waiting > 0 {
		n.Waiting--
		h, err := t.takeHead(concWaitPrefix(r.Queue, r.Conc.Key), n.Waiting == 0)
		if err != nil {
			return err
		}
		h.Waiting, h.Slot = false, true
		n.Active++
		if err := t.index(h, now); err != nil {
			return err
		}
		if err := t.putJob(h); err != nil {
			return err
		}
		if t.ready == nil {
			t.ready = map[string]bool{}
		}
		t.ready[h.Queue] = true
	}
	if err := t.putKeyCount(r.Queue, r.Conc.Key, n); err != nil {
		return err
	}
	return t.putJob(r)
}

// leaveReserved frees the slot of r, which leaves the reserved state for
// state, unless it keeps it (storerule.KeepsSlot).
func (t *tx) leaveReserved(r *record, state store.JobState, now int64) error {
	if !r.Slot || storerule.KeepsSlot(r.Conc, state) {
		return nil
	}
	return t.releaseSlot(r, now)
}

// takeHead takes the first entry off the waiting list prefix (a
// concurrency or rate key's, whose entries end with a job id) and returns
// its job; last says the list is then empty, and its cursor goes.
func (t *tx) takeHead(prefix []byte, last bool) (*record, error) {
	var found []byte
	if err := t.walk(prefix, prefixEnd(prefix), false, func(k, _ []byte) (bool, error) {
		found = append([]byte(nil), k...)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if found == nil {
		return nil, errors.New("pebble: a key counts waiting jobs its list does not have")
	}
	if err := t.del(found); err != nil {
		return nil, err
	}
	t.taken(prefix, found)
	if last {
		t.dropCursor(prefix)
	}
	var id store.JobID
	copy(id[:], found[len(found)-len(id):])
	return getJob(t.b, id)
}
