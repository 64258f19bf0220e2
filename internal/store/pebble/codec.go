package pebble

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

var errCorrupt = errors.New("pebble: corrupt record")

// record is a job as stored: the job and its lease.
type record struct {
	store.Job
	Headers      []byte // JSON, as storerule.Prepare encodes it
	LeaseToken   store.LeaseToken
	HasToken     bool
	LeaseExpires int64 // 0: no live lease
	WorkerID     string
	RunAt        int64
	CreatedAt    int64
	FinalizedAt  int64 // 0: not finalized
	// ReleaseKeyOn is the job's release_key_on. It is the record's last
	// field but for the flow fields, written only when set (or when a flow
	// field is): a record without it (written before the field existed, or
	// by a job without the policy) releases nothing.
	ReleaseKeyOn store.ReleaseOn
	// The flow fields, after ReleaseKeyOn, each written only when set:
	// Follower is the follow-up that waits for this job to end (Job.
	// FollowsJobID names the job a follow-up waits for).
	Follower store.JobID
	// Conc is the job's per-key concurrency (nil: none); Slot says it holds
	// a slot of its key, Waiting that it waits for one in the key's waiting
	// list (storerule.KeyCount).
	Conc    *store.ConcurrencyKey
	Slot    bool
	Waiting bool
	// Rate is the job's per-key rate (nil: none); RateWaiting says it waits
	// in its rate key's waiting list, since its window was full until
	// RateFreesAt.
	Rate        *store.RateKey
	RateWaiting bool
	RateFreesAt int64
}

// waits reports whether the job waits off the indexes: a follow-up whose
// original has not ended.
func (r *record) waits() bool { return r.hold() != store.HoldNone }

// hold says what holds the job back off the indexes, if anything.
func (r *record) hold() store.Hold {
	if r.State.Finalized() {
		return store.HoldNone
	}
	if r.FollowsJobID != (store.JobID{}) {
		return store.HoldFollowUp
	}
	if r.Waiting {
		return store.HoldConcurrency
	}
	if r.RateWaiting {
		return store.HoldRate
	}
	return store.HoldNone
}

// The flow fields' flags.
const (
	flowFollows  = 1 << 0
	flowFollower = 1 << 1
	flowConc     = 1 << 2 // then the key, the limit and 1 when ordered
	flowSlot     = 1 << 3
	flowWaiting  = 1 << 4
	flowRate     = 1 << 5 // then the key, the limit and the period (µs)
	flowRateWait = 1 << 6 // then RateFreesAt
)

// encoder appends fields; decoder reads them back in the same order.
type encoder struct{ b []byte }

func (e *encoder) bytes(v []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) str(v string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) int(v int64) { e.b = binary.AppendVarint(e.b, v) }

// optBytes writes nil and empty apart.
func (e *encoder) optBytes(v []byte) {
	if v == nil {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.bytes(v)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err = errCorrupt; d.b = nil }

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n, w := binary.Uvarint(d.b)
	if w <= 0 || uint64(len(d.b)-w) < n {
		d.fail()
		return nil
	}
	v := append([]byte{}, d.b[w:w+int(n)]...)
	d.b = d.b[w+int(n):]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) optBytes() []byte {
	if len(d.b) == 0 {
		d.fail()
		return nil
	}
	flag := d.b[0]
	d.b = d.b[1:]
	if flag == 0 {
		return nil
	}
	return d.bytes()
}

func (d *decoder) fixed(dst []byte) {
	if len(d.b) < len(dst) {
		d.fail()
		return
	}
	copy(dst, d.b)
	d.b = d.b[len(dst):]
}

func encodeJob(r *record) []byte {
	e := encoder{b: make([]byte, 0, 64+len(r.Payload)+len(r.Headers)+len(r.Result))}
	e.str(r.Queue)
	e.str(r.JobType)
	e.bytes(r.Payload)
	if r.IdempotencyKey != nil {
		e.optBytes([]byte(*r.IdempotencyKey))
	} else {
		e.optBytes(nil)
	}
	e.int(int64(r.Priority))
	e.int(r.RunAt)
	e.int(int64(r.MaxAttempts))
	e.int(int64(r.Attempts))
	e.optBytes(r.Headers)
	e.int(int64(r.State))
	e.int(r.CreatedAt)
	e.int(r.FinalizedAt)
	e.optBytes(r.Result)
	e.str(r.LastError)
	if r.HasToken {
		e.b = append(e.b, 1)
		e.b = append(e.b, r.LeaseToken[:]...)
	} else {
		e.b = append(e.b, 0)
	}
	e.int(r.LeaseExpires)
	e.str(r.WorkerID)
	var flags int64
	if r.FollowsJobID != (store.JobID{}) {
		flags |= flowFollows
	}
	if r.Follower != (store.JobID{}) {
		flags |= flowFollower
	}
	if r.Conc != nil {
		flags |= flowConc
	}
	if r.Slot {
		flags |= flowSlot
	}
	if r.Waiting {
		flags |= flowWaiting
	}
	if r.Rate != nil {
		flags |= flowRate
	}
	if r.RateWaiting {
		flags |= flowRateWait
	}
	if r.ReleaseKeyOn != 0 || flags != 0 {
		e.int(int64(r.ReleaseKeyOn))
	}
	if flags != 0 {
		e.int(flags)
		if flags&flowFollows != 0 {
			e.b = append(e.b, r.FollowsJobID[:]...)
		}
		if flags&flowFollower != 0 {
			e.b = append(e.b, r.Follower[:]...)
		}
		if flags&flowConc != 0 {
			e.str(r.Conc.Key)
			e.int(int64(r.Conc.Limit))
			ordered := int64(0)
			if r.Conc.Ordered {
				ordered = 1
			}
			e.int(ordered)
		}
		if flags&flowRate != 0 {
			e.str(r.Rate.Key)
			e.int(int64(r.Rate.Limit))
			e.int(r.Rate.Period.Microseconds())
		}
		if flags&flowRateWait != 0 {
			e.int(r.RateFreesAt)
		}
	}
	return e.b
}

func decodeJob(id store.JobID, b []byte) (*record, error) {
	d := decoder{b: b}
	r := &record{}
	r.ID = id
	r.Queue = d.str()
	r.JobType = d.str()
	r.Payload = d.bytes()
	if k := d.optBytes(); k != nil {
		s := string(k)
		r.IdempotencyKey = &s
	}
	r.Priority = int32(d.int())
	r.RunAt = d.int()
	r.MaxAttempts = int32(d.int())
	r.Attempts = int32(d.int())
	r.Headers = d.optBytes()
	r.State = store.JobState(d.int())
	r.CreatedAt = d.int()
	r.FinalizedAt = d.int()
	r.Result = d.optBytes()
	r.LastError = d.str()
	var flag [1]byte
	d.fixed(flag[:])
	if flag[0] == 1 {
		r.HasToken = true
		d.fixed(r.LeaseToken[:])
	}
	r.LeaseExpires = d.int()
	r.WorkerID = d.str()
	if len(d.b) > 0 {
		r.ReleaseKeyOn = store.ReleaseOn(d.int())
	}
	if len(d.b) > 0 {
		flags := d.int()
		if flags&flowFollows != 0 {
			d.fixed(r.FollowsJobID[:])
		}
		if flags&flowFollower != 0 {
			d.fixed(r.Follower[:])
		}
		if flags&flowConc != 0 {
			r.Conc = &store.ConcurrencyKey{Key: d.str(), Limit: int(d.int()), Ordered: d.int() == 1}
		}
		r.Slot, r.Waiting = flags&flowSlot != 0, flags&flowWaiting != 0
		if flags&flowRate != 0 {
			r.Rate = &store.RateKey{Key: d.str(), Limit: int(d.int()), Period: time.Duration(d.int()) * time.Microsecond}
		}
		if flags&flowRateWait != 0 {
			r.RateWaiting, r.RateFreesAt = true, d.int()
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// job returns the record as the Store interface reports it.
func (r *record) job() (*store.Job, error) {
	j := r.Job
	j.RunAt = storerule.FromMicros(r.RunAt)
	j.CreatedAt = storerule.FromMicros(r.CreatedAt)
	if r.FinalizedAt != 0 {
		j.FinalizedAt = storerule.FromMicros(r.FinalizedAt)
	}
	h, err := storerule.DecodeHeaders(r.Headers)
	if err != nil {
		return nil, err
	}
	j.Headers = h
	j.Hold = r.hold()
	if j.Hold != store.HoldNone {
		j.State = store.JobStateScheduled
	}
	if r.Conc != nil {
		j.ConcurrencyKey, j.HasConcurrency = r.Conc.Key, true
	}
	if r.Rate != nil {
		j.RateKey, j.HasRate = r.Rate.Key, true
	}
	if r.RateWaiting {
		j.HeldUntil = storerule.FromMicros(r.RateFreesAt)
	}
	return &j, nil
}

// dedupRecord is a stored dedup record.
type dedupRecord struct {
	storerule.Record
	Hits int64
	// Slots are a rule key's slots when it holds more than one
	// (storerule.RuleSlots); written only then, after Hits.
	Slots []int64
}

func encodeDedup(r *dedupRecord) []byte {
	b := make([]byte, 0, 16+32+3*binary.MaxVarintLen64)
	b = append(b, r.JobID[:]...)
	b = append(b, r.Fingerprint[:]...)
	b = binary.AppendVarint(b, r.FirstEnqueuedAt)
	b = binary.AppendVarint(b, r.ExpiresAt)
	b = binary.AppendVarint(b, r.Hits)
	if len(r.Slots) > 0 {
		b = binary.AppendUvarint(b, uint64(len(r.Slots)))
		for _, s := range r.Slots {
			b = binary.AppendVarint(b, s)
		}
	}
	return b
}

func decodeDedup(b []byte) (dedupRecord, error) {
	var r dedupRecord
	d := decoder{b: b}
	d.fixed(r.JobID[:])
	d.fixed(r.Fingerprint[:])
	r.FirstEnqueuedAt = d.int()
	r.ExpiresAt = d.int()
	r.Hits = d.int()
	if len(d.b) > 0 {
		n, w := binary.Uvarint(d.b)
		if w <= 0 || n > uint64(len(d.b)) {
			return r, errCorrupt
		}
		d.b = d.b[w:]
		r.Slots = make([]int64, n)
		for i := range r.Slots {
			r.Slots[i] = d.int()
		}
	}
	return r, d.err
}

// effectRecord is a stored effect key.
type effectRecord struct {
	storerule.EffectRecord
	TTL int64 // microseconds a completed record lives
}

func encodeEffect(r *effectRecord) []byte {
	e := encoder{b: make([]byte, 0, 48+len(r.Result))}
	e.int(int64(r.State))
	e.b = append(e.b, r.Token[:]...)
	e.int(r.LeaseExpiresAt)
	e.optBytes(r.Result)
	e.int(r.CompletedAt)
	e.int(r.ExpiresAt)
	e.int(r.TTL)
	return e.b
}

func decodeEffect(b []byte) (*effectRecord, error) {
	r := &effectRecord{}
	d := decoder{b: b}
	r.State = store.EffectState(d.int())
	d.fixed(r.Token[:])
	r.LeaseExpiresAt = d.int()
	r.Result = d.optBytes()
	r.CompletedAt = d.int()
	r.ExpiresAt = d.int()
	r.TTL = d.int()
	return r, d.err
}
