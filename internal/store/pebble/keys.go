package pebble

import (
	"encoding/binary"

	"github.com/sepp-dev/sepp/internal/store"
)

// The key layout. Every key starts with one byte naming its kind; strings
// that are not last in a key (queues, scopes) are length-prefixed, so a
// queue's keys share a prefix no other queue's keys have, and keys are
// compared byte for byte with nothing reserved. Integers are big-endian with
// the sign bit flipped, so they sort as numbers.
//
//	'm'                                      → the schema version (uvarint)
//	'j' id                                   → a job (encodeJob)
//	'd' len(queue) queue key                 → a dedup record (encodeDedup)
//	'r' len(queue) queue ^priority run_at id → a ready job: available, or scheduled and come due
//	's' run_at id                            → a scheduled job not yet due: len(queue) queue priority
//	'l' lease_expires_at id                  → a reserved job's lease
//	'x' expires_at len(queue) queue key      → a dedup record's expiry
//	'f' state finalized_at id                → a finalized job, for retention
//	'q' queue                                → 1 while the queue is paused, 0 once resumed
//	'e' len(scope) scope key                 → an effect record (encodeEffect)
//	't' token                                → an effect's holder: len(scope) scope key
//	'y' expires_at len(scope) scope key      → a completed effect's expiry
//	'k' len(queue) queue ckey                → a concurrency key's count (storerule.KeyCount)
//	'w' len(queue) queue len(ckey) ckey order id → a job waiting for a slot of its concurrency key;
//	                                           order is empty (ordered: by id) or ^priority run_at
//	'a' len(queue) queue rkey                → a rate key's record (rateRecord)
//	'b' len(queue) queue len(rkey) rkey ^priority run_at id → a job waiting for its rate key's window
//	'v' at len(queue) queue rkey             → when to look at a rate key again (rateRecord.Timer)
//	'c' name                                 → a schedule's state (encodeSchedule)
//
// The indexes read from their head ('r' per queue, 's', 'l', 'x', 'f' per
// state, 'y') are walked from a cursor the writer keeps (see cursors), so
// the tombstones of entries already taken do not slow the next walk.
const (
	kindSchema    = 'm'
	kindJob       = 'j'
	kindDedup     = 'd'
	kindReady     = 'r'
	kindScheduled = 's'
	kindLease     = 'l'
	kindDedupExp  = 'x'
	kindFinalized = 'f'
	kindPaused    = 'q'
	kindEffect    = 'e'
	kindToken     = 't'
	kindEffectExp = 'y'
	kindConcCount = 'k'
	kindConcWait  = 'w'
	kindRate      = 'a'
	kindRateWait  = 'b'
	kindRateTimer = 'v'
	kindSchedule  = 'c'
)

var schemaKey = []byte{kindSchema}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInt64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

func readInt64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func jobKey(id store.JobID) []byte { return append([]byte{kindJob}, id[:]...) }

// dedupName is the part of a dedup key after its kind byte, shared with the
// expiry index.
func dedupName(queue, key string) []byte {
	return append(appendString(make([]byte, 0, len(queue)+len(key)+2), queue), key...)
}

func dedupKey(queue, key string) []byte { return append([]byte{kindDedup}, dedupName(queue, key)...) }

func dedupExpKey(expires int64, queue, key string) []byte {
	return append(appendInt64([]byte{kindDedupExp}, expires), dedupName(queue, key)...)
}

// readyPrefix is the prefix of a queue's ready entries.
func readyPrefix(queue string) []byte { return appendString([]byte{kindReady}, queue) }

func readyKey(queue string, priority int32, runAt int64, id store.JobID) []byte {
	b := readyPrefix(queue)
	// Higher priority first: the sign-flipped value, inverted.
	b = binary.BigEndian.AppendUint32(b, ^(uint32(priority) ^ (1 << 31)))
	b = appendInt64(b, runAt)
	return append(b, id[:]...)
}

// decodeReady reads the priority, run-at and id from a ready key of a queue
// whose prefix is n bytes long.
func decodeReady(k []byte, n int) (int32, int64, store.JobID) {
	p := int32(^binary.BigEndian.Uint32(k[n:]) ^ (1 << 31))
	runAt := readInt64(k[n+4:])
	var id store.JobID
	copy(id[:], k[n+12:])
	return p, runAt, id
}

func scheduledKey(runAt int64, id store.JobID) []byte {
	return append(appendInt64([]byte{kindScheduled}, runAt), id[:]...)
}

func leaseKey(expires int64, id store.JobID) []byte {
	return append(appendInt64([]byte{kindLease}, expires), id[:]...)
}

func finalizedPrefix(state store.JobState) []byte { return []byte{kindFinalized, byte(state)} }

func finalizedKey(state store.JobState, at int64, id store.JobID) []byte {
	return append(appendInt64(finalizedPrefix(state), at), id[:]...)
}

func pausedKey(queue string) []byte { return append([]byte{kindPaused}, queue...) }

func effectName(scope, key string) []byte {
	return append(appendString(make([]byte, 0, len(scope)+len(key)+2), scope), key...)
}

func effectKey(scope, key string) []byte {
	return append([]byte{kindEffect}, effectName(scope, key)...)
}

func tokenKey(t store.LeaseToken) []byte { return append([]byte{kindToken}, t[:]...) }

func effectExpKey(expires int64, scope, key string) []byte {
	return append(appendInt64([]byte{kindEffectExp}, expires), effectName(scope, key)...)
}

// upTo returns the upper bound, exclusive, of the keys of an index ordered
// by time whose time is at or before t.
func upTo(prefix []byte, t int64) []byte {
	return appendInt64(append([]byte(nil), prefix...), t+1)
}

// prefixEnd returns the first key after every key that starts with prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// splitName splits a length-prefixed name (queue or scope, then key).
func splitName(b []byte) (string, string, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return "", "", false
	}
	return string(b[w : w+int(n)]), string(b[w+int(n):]), true
}

func concCountKey(queue, ckey string) []byte {
	return append(appendString([]byte{kindConcCount}, queue), ckey...)
}

// concWaitPrefix is the prefix of the waiting list of a concurrency key.
func concWaitPrefix(queue, ckey string) []byte {
	return appendString(appendString([]byte{kindConcWait}, queue), ckey)
}

// concWaitKey is r's entry in its key's waiting list: by id when ordered,
// else in delivery order.
func concWaitKey(r *record) []byte {
	return waitEntry(concWaitPrefix(r.Queue, r.Conc.Key), r, !r.Conc.Ordered)
}

// waitEntry is r's entry in the waiting list prefix: its id, after its
// priority and run-at when byDelivery.
func waitEntry(prefix []byte, r *record, byDelivery bool) []byte {
	b := prefix
	if byDelivery {
		b = binary.BigEndian.AppendUint32(b, ^(uint32(r.Priority) ^ (1 << 31)))
		b = appendInt64(b, r.RunAt)
	}
	return append(b, r.ID[:]...)
}

func rateKey(queue, rkey string) []byte {
	return append(appendString([]byte{kindRate}, queue), rkey...)
}

// rateWaitPrefix is the prefix of the waiting list of a rate key.
func rateWaitPrefix(queue, rkey string) []byte {
	return appendString(appendString([]byte{kindRateWait}, queue), rkey)
}

// rateWaitKey is r's entry in its rate key's waiting list, in delivery
// order.
func rateWaitKey(r *record) []byte { return waitEntry(rateWaitPrefix(r.Queue, r.Rate.Key), r, true) }

func rateTimerKey(at int64, queue, rkey string) []byte {
	return append(appendString(appendInt64([]byte{kindRateTimer}, at), queue), rkey...)
}

func scheduleKey(name string) []byte { return append([]byte{kindSchedule}, name...) }
