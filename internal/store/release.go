package store

// ReleaseOn is a queue's release_key_on policy, fixed on each job when it is
// enqueued: the final states whose arrival deletes the job's dedup record in
// the same write, so that the next enqueue of the key creates a new job. A
// record that no longer names the job (replaced after its expiry by a newer
// job) is left alone. The zero value releases nothing: the record lasts its
// window.
type ReleaseOn uint8

// The states of a ReleaseOn. The values are stored with each job.
const (
	ReleaseOnCompleted ReleaseOn = 1 << iota
	ReleaseOnDead
	ReleaseOnCancelled
)

// releaseOnNames are the release_key_on names, in config order.
var releaseOnNames = []struct {
	name string
	bit  ReleaseOn
}{
	{"dead", ReleaseOnDead},
	{"cancelled", ReleaseOnCancelled},
	{"completed", ReleaseOnCompleted},
}

// ReleaseOnStates returns the set named by release_key_on values ("dead",
// "cancelled", "completed"); unknown names (refused when the config is
// loaded) add nothing.
func ReleaseOnStates(names []string) ReleaseOn {
	var r ReleaseOn
	for _, n := range names {
		for _, v := range releaseOnNames {
			if v.name == n {
				r |= v.bit
			}
		}
	}
	return r
}

// ReleaseOnNames lists the names release_key_on accepts.
func ReleaseOnNames() []string {
	out := make([]string, len(releaseOnNames))
	for i, v := range releaseOnNames {
		out[i] = v.name
	}
	return out
}

// Releases reports whether reaching state s deletes the job's dedup record.
func (r ReleaseOn) Releases(s JobState) bool {
	switch s {
	case JobStateCompleted:
		return r&ReleaseOnCompleted != 0
	case JobStateDead:
		return r&ReleaseOnDead != 0
	case JobStateCancelled:
		return r&ReleaseOnCancelled != 0
	}
	return false
}

// ReleaseBit returns the member of a ReleaseOn that stands for the final
// state s, or 0 when s is not final.
func (s JobState) ReleaseBit() ReleaseOn {
	switch s {
	case JobStateCompleted:
		return ReleaseOnCompleted
	case JobStateDead:
		return ReleaseOnDead
	case JobStateCancelled:
		return ReleaseOnCancelled
	}
	return 0
}
