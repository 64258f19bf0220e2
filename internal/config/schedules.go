package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sepp-dev/sepp/internal/schedule"
)

// MinScheduleDedupWindow is the shortest dedup window a schedule's queue
// may have. A tick is exact across nodes because its job's key is
// remembered while any node could still fire it: a node fires a tick only
// after reading that no node recorded it, so the record must outlive one
// read-then-enqueue of the slowest node, seconds; an hour leaves room for a
// node stalled (paused, swapping) between the two.
const MinScheduleDedupWindow = time.Hour

// ScheduleConfig is one [[schedules]] entry: a job enqueued at each tick of a
// cron expression, once across every node (docs/schedules.md).
type ScheduleConfig struct {
	// Name names the schedule in its jobs' keys, logs, metrics and the
	// dashboard. Required, unique.
	Name string `toml:"name"`
	// Cron is five fields, a descriptor like "@hourly", or "@every 30s".
	// Required.
	Cron string `toml:"cron"`
	// Timezone is the IANA zone the cron fields are read in. Default UTC.
	Timezone string `toml:"timezone"`
	// Queue and JobType are the job's. Required.
	Queue   string `toml:"queue"`
	JobType string `toml:"job_type"`
	// Payload is the job's payload, the string's bytes (UTF-8); or
	// PayloadFile, a file whose bytes are the payload, read at start. At
	// most one. Default: empty.
	Payload     string `toml:"payload"`
	PayloadFile string `toml:"payload_file"`
	// Headers are the job's headers. Default: none.
	Headers map[string]string `toml:"headers"`
	// CatchUp is "none", "last" (the default) or "all": what a node does
	// with ticks that came while no node fired them.
	CatchUp string `toml:"catch_up"`
}

// ResolvedSchedule is a [[schedules]] entry ready to run: its cron parsed,
// its payload read, its catch_up resolved.
type ResolvedSchedule struct {
	ScheduleConfig
	Spec        *schedule.Spec
	PayloadData []byte
	CatchUpMode schedule.CatchUp
}

// ResolvedSchedules returns the [[schedules]] entries ready to run. It reads
// each payload_file, so it can fail after validation if a file went away.
func (c *Config) ResolvedSchedules() ([]ResolvedSchedule, error) {
	out := make([]ResolvedSchedule, 0, len(c.Schedules))
	for _, sc := range c.Schedules {
		spec, err := schedule.Parse(sc.Cron, sc.Timezone)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: cron: %w", sc.Name, err)
		}
		mode, err := schedule.ParseCatchUp(sc.CatchUp)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: catch_up: %w", sc.Name, err)
		}
		payload := []byte(sc.Payload)
		if sc.PayloadFile != "" {
			if payload, err = os.ReadFile(sc.PayloadFile); err != nil {
				return nil, fmt.Errorf("schedule %q: payload_file: %w", sc.Name, err)
			}
		}
		out = append(out, ResolvedSchedule{ScheduleConfig: sc, Spec: spec, PayloadData: payload, CatchUpMode: mode})
	}
	return out, nil
}

// validateSchedules checks the [[schedules]] entries into v.
func (c *Config) validateSchedules(v *validator) {
	first := make(map[string]int, len(c.Schedules))
	for i, sc := range c.Schedules {
		p := fmt.Sprintf("schedules[%d]", i)
		required := func(key, val, example string) bool {
			if val == "" && !v.has(p+"."+key) {
				v.fail(p+"."+key, "missing: every [[schedules]] entry needs "+key+", like "+key+" = "+example)
				return false
			}
			return true
		}
		if required("name", sc.Name, `"nightly-report"`) {
			// The name is part of every tick's idempotency key, so it
			// follows the rules of names on the wire.
			if err := CheckQueueName(sc.Name); err != nil {
				v.bad(p+".name", err.Error())
			} else if j, dup := first[sc.Name]; dup {
				at := fmt.Sprintf("schedules[%d]", j)
				if l := v.line(at + ".name"); l > 0 {
					at = "line " + strconv.Itoa(l)
				}
				v.fail(p+".name", fmt.Sprintf("duplicate name %q (first at %s); each schedule needs its own name, which its jobs' keys carry", sc.Name, at))
			} else {
				first[sc.Name] = i
			}
		}
		if _, err := schedule.LoadZone(sc.Timezone); err != nil {
			v.fail(p+".timezone", err.Error())
		} else if required("cron", sc.Cron, `"0 3 * * *"`) {
			if _, err := schedule.Parse(sc.Cron, sc.Timezone); err != nil {
				v.fail(p+".cron", fmt.Sprintf("%q: %v", sc.Cron, err))
			}
		}
		if _, err := schedule.ParseCatchUp(sc.CatchUp); err != nil {
			v.bad(p+".catch_up", err.Error())
		}
		if required("queue", sc.Queue, `"reports"`) {
			c.validateScheduleQueue(v, p, sc)
		}
		if required("job_type", sc.JobType, `"report.nightly"`) {
			switch q := c.scheduleQueue(sc.Queue); {
			case len(sc.JobType) > 255:
				v.bad(p+".job_type", fmt.Sprintf("is %d bytes; the limit is 255", len(sc.JobType)))
			case !utf8.ValidString(sc.JobType):
				v.bad(p+".job_type", "is not valid UTF-8")
			case strings.TrimSpace(sc.JobType) == "":
				v.bad(p+".job_type", "must not be blank")
			case len(q.JobTypes) > 0 && !q.AcceptsJobType(sc.JobType):
				v.fail(p+".job_type", fmt.Sprintf("%q is not accepted by queue %q, whose job_types are %q: add it there, or pick one of those", sc.JobType, sc.Queue, q.JobTypes))
			}
		}
		c.validateSchedulePayload(v, p, sc)
		for name := range sc.Headers {
			if !validHeaderName(name) {
				v.bad(p+".headers", fmt.Sprintf("%q is not a header name (letters, digits and !#$%%&'*+-^_`|~)", name))
				break
			}
		}
	}
}

// scheduleQueue is Queue without the index, which validate runs before.
func (c *Config) scheduleQueue(name string) QueueConfig {
	for _, q := range c.Queues {
		if q.Name == name {
			return c.resolve(q)
		}
	}
	return c.resolve(QueueConfig{Name: name})
}

// validateScheduleQueue checks the schedule's queue, and that its settings
// keep one job per tick (docs/schedules.md, "What it relies on").
func (c *Config) validateScheduleQueue(v *validator, p string, sc ScheduleConfig) {
	if err := CheckQueueName(sc.Queue); err != nil {
		v.bad(p+".queue", err.Error())
		return
	}
	if c.Server.Strict && !c.declaredIn(sc.Queue) {
		v.fail(p+".queue", fmt.Sprintf("queue %q is not declared and server.strict = true: add a [[queues]] entry named %q, or fix the queue name", sc.Queue, sc.Queue))
		return
	}
	q := c.scheduleQueue(sc.Queue)
	switch {
	case q.DedupWindowMs > 0 && q.DedupWindowMs < MinScheduleDedupWindow.Milliseconds():
		v.fail(p+".queue", fmt.Sprintf("queue %q has a dedup window of %d ms, under the %d ms (an hour) a schedule needs to keep one job per tick across nodes: raise the queue's dedup_window_ms, or use another queue", sc.Queue, q.DedupWindowMs, MinScheduleDedupWindow.Milliseconds()))
	case len(q.ReleaseKeyOn) > 0:
		v.fail(p+".queue", fmt.Sprintf("queue %q has release_key_on = %q, which frees a tick's key when its job ends, so a node that fires the tick late would make a second job: use a queue without release_key_on", sc.Queue, q.ReleaseKeyOn))
	case q.WhenRunning == WhenRunningRunAgain:
		v.fail(p+".queue", fmt.Sprintf(`queue %q has when_running = "run_again", which makes a second job of a tick fired again while its job runs: use a queue without it`, sc.Queue))
	case q.OnDuplicate == OnDuplicateDebounce:
		v.fail(p+".queue", fmt.Sprintf(`queue %q has on_duplicate = "debounce", which would put a tick's job off each time another node fires the tick: use a queue without it`, sc.Queue))
	}
}

// validateSchedulePayload checks payload and payload_file: at most one, and
// the file readable and within server.max_payload_bytes.
func (c *Config) validateSchedulePayload(v *validator, p string, sc ScheduleConfig) {
	size := int64(len(sc.Payload))
	switch {
	case sc.PayloadFile != "" && (sc.Payload != "" || v.has(p+".payload")):
		v.fail(p+".payload_file", "cannot be set together with payload; keep one")
		return
	case sc.PayloadFile != "":
		fi, err := os.Stat(sc.PayloadFile)
		if err != nil {
			v.fail(p+".payload_file", fmt.Sprintf("cannot be read: %v", err))
			return
		}
		if !fi.Mode().IsRegular() {
			v.fail(p+".payload_file", fmt.Sprintf("%s is not a regular file", sc.PayloadFile))
			return
		}
		size = fi.Size()
	}
	if max := c.Server.MaxPayloadBytes; max > 0 && size > max {
		key := p + ".payload"
		if sc.PayloadFile != "" {
			key = p + ".payload_file"
		}
		v.fail(key, fmt.Sprintf("the payload is %d bytes, over server.max_payload_bytes (%d): shorten it or raise max_payload_bytes", size, max))
	}
}
