package pebble

import (
	"encoding/binary"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// Per-key rate, as storerule.RateRoom decides it. A rate key's record
// (under 'a') keeps its slots, how many of its jobs wait (under 'b') and
// when to look at it again (Timer, indexed under 'v'): when its window has
// room for the jobs that wait, or, with none waiting, when its last slot
// leaves the window and the record can go.

// rateRecord is a rate key's record.
type rateRecord struct {
	Limit   int64
	Period  int64 // µs
	Slots   []int64
	Waiting int64
	Timer   int64 // 0: none
}

func (rec *rateRecord) key() *store.RateKey {
	return &store.RateKey{Limit: int(rec.Limit), Period: time.Duration(rec.Period) * time.Microsecond}
}

func (t *tx) rateRecord(queue, rkey string) (*rateRecord, error) {
	v, ok, err := get(t.b, rateKey(queue, rkey))
	if err != nil || !ok {
		return &rateRecord{}, err
	}
	d := decoder{b: v}
	rec := &rateRecord{Limit: d.int(), Period: d.int()}
	n := d.int()
	if n < 0 || n > int64(len(v)) {
		return nil, errCorrupt
	}
	rec.Slots = make([]int64, n)
	for i := range rec.Slots {
		rec.Slots[i] = d.int()
	}
	rec.Waiting, rec.Timer = d.int(), d.int()
	return rec, d.err
}

func (t *tx) putRate(queue, rkey string, rec *rateRecord) error {
	b := binary.AppendVarint(nil, rec.Limit)
	b = binary.AppendVarint(b, rec.Period)
	b = binary.AppendVarint(b, int64(len(rec.Slots)))
	for _, s := range rec.Slots {
		b = binary.AppendVarint(b, s)
	}
	b = binary.AppendVarint(b, rec.Waiting)
	return t.set(rateKey(queue, rkey), binary.AppendVarint(b, rec.Timer))
}

// setTimer moves the record's timer to at.
func (t *tx) setTimer(queue, rkey string, rec *rateRecord, at int64) error {
	if rec.Timer == at {
		return nil
	}
	if rec.Timer != 0 {
		if err := t.del(rateTimerKey(rec.Timer, queue, rkey)); err != nil {
			return err
		}
	}
	rec.Timer = at
	return t.setIndex([]byte{kindRateTimer}, rateTimerKey(at, queue, rkey), nil)
}

// rateGate reserves a slot of r's rate key at now, or, when its window is
// full, puts r (taken off the ready index by the caller) in the key's
// waiting list until it has room, reporting the time to p.WakeAt. It
// reports whether r may be reserved.
func (t *tx) rateGate(r *record, p *store.ReserveParams, now int64) (bool, error) {
	rec, err := t.rateRecord(r.Queue, r.Rate.Key)
	if err != nil {
		return false, err
	}
	rec.Limit, rec.Period = int64(r.Rate.Limit), r.Rate.Period.Microseconds()
	room, frees := storerule.RateRoom(r.Rate, rec.Slots, now)
	if room == 0 {
		r.RateWaiting, r.RateFreesAt = true, frees
		rec.Waiting++
		if err := t.setIndex(rateWaitPrefix(r.Queue, r.Rate.Key), rateWaitKey(r), nil); err != nil {
			return false, err
		}
		if rec.Timer == 0 || rec.Timer > frees || rec.Waiting == 1 {
			if err := t.setTimer(r.Queue, r.Rate.Key, rec, frees); err != nil {
				return false, err
			}
		}
		if p.WakeAt != nil {
			p.WakeAt(r.Queue, storerule.FromMicros(rec.Timer))
		}
		if err := t.putRate(r.Queue, r.Rate.Key, rec); err != nil {
			return false, err
		}
		return false, t.putJob(r)
	}
	rec.Slots = storerule.RateTake(r.Rate, rec.Slots, now)
	if rec.Waiting == 0 {
		// Nothing waits: look again when the last slot leaves the window.
		if err := t.setTimer(r.Queue, r.Rate.Key, rec, rec.Slots[len(rec.Slots)-1]+rec.Period); err != nil {
			return false, err
		}
	}
	return true, t.putRate(r.Queue, r.Rate.Key, rec)
}

// maxRateTimers bounds how many rate keys one Reserve looks at again.
const maxRateTimers = 1024

// fireRateTimers looks again at the rate keys whose time has come: as many
// of their waiting jobs as their windows have room for become deliverable;
// a key with none waiting and no slot left in its window is forgotten.
func fireRateTimers(t *tx, p *store.ReserveParams, now int64) error {
	prefix := []byte{kindRateTimer}
	n := 0
	return t.walk(prefix, upTo(prefix, now), true, func(k, _ []byte) (bool, error) {
		if n == maxRateTimers {
			return false, nil
		}
		n++
		at := readInt64(k[1:])
		queue, rkey, ok := splitName(k[9:])
		if !ok {
			return false, errCorrupt
		}
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		rec, err := t.rateRecord(queue, rkey)
		if err != nil {
			return false, err
		}
		if rec.Timer != at {
			return true, nil
		}
		rec.Timer = 0
		rk := rec.key()
		if rec.Waiting > 0 {
			room, _ := storerule.RateRoom(rk, rec.Slots, now)
			moved := 0
			for moved < room && rec.Waiting > 0 {
				if err := t.rateWaitingHead(queue, rkey, rec, now); err != nil {
					return false, err
				}
				moved++
			}
			if rec.Waiting > 0 {
				next := storerule.RateNext(rk, rec.Slots, moved, now)
				if err := t.setTimer(queue, rkey, rec, next); err != nil {
					return false, err
				}
				if p.WakeAt != nil {
					p.WakeAt(queue, storerule.FromMicros(next))
				}
			}
			return true, t.putRate(queue, rkey, rec)
		}
		if len(rec.Slots) > 0 && rec.Slots[len(rec.Slots)-1]+rec.Period > now {
			if err := t.setTimer(queue, rkey, rec, rec.Slots[len(rec.Slots)-1]+rec.Period); err != nil {
				return false, err
			}
			return true, t.putRate(queue, rkey, rec)
		}
		return true, t.del(rateKey(queue, rkey))
	})
}

// rateWaitingHead makes the first job waiting for the rate key deliverable.
func (t *tx) rateWaitingHead(queue, rkey string, rec *rateRecord, now int64) error {
	rec.Waiting--
	h, err := t.takeHead(rateWaitPrefix(queue, rkey), rec.Waiting == 0)
	if err != nil {
		return err
	}
	h.RateWaiting, h.RateFreesAt = false, 0
	if err := t.index(h, now); err != nil {
		return err
	}
	if t.ready == nil {
		t.ready = map[string]bool{}
	}
	t.ready[h.Queue] = true
	return t.putJob(h)
}

// leaveRateWaiting takes the waiting r out of its rate key's waiting list
// (it is cancelled, or replaced).
func (t *tx) leaveRateWaiting(r *record) error {
	rec, err := t.rateRecord(r.Queue, r.Rate.Key)
	if err != nil {
		return err
	}
	r.RateWaiting, r.RateFreesAt = false, 0
	rec.Waiting--
	if err := t.del(rateWaitKey(r)); err != nil {
		return err
	}
	if err := t.putRate(r.Queue, r.Rate.Key, rec); err != nil {
		return err
	}
	return t.putJob(r)
}
