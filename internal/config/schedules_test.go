package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const scheduleBase = "[[schedules]]\nname = \"nightly\"\ncron = \"0 3 * * *\"\nqueue = \"reports\"\njob_type = \"report\"\n"

func TestSchedulesParsed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "payload.bin")
	if err := os.WriteFile(file, []byte{0, 1, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	doc := scheduleBase + "timezone = \"Europe/Berlin\"\npayload = '{\"a\": 1}'\nheaders = { \"X-Source\" = \"cron\" }\ncatch_up = \"all\"\n" +
		"[[schedules]]\nname = \"tick\"\ncron = \"@every 30s\"\nqueue = \"reports\"\njob_type = \"tick\"\npayload_file = \"" + file + "\"\n[schedules.headers]\nX-A = \"1\"\n"
	c, err := Parse("sepp.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.ResolvedSchedules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].CatchUpMode != "all" || string(rs[0].PayloadData) != `{"a": 1}` || rs[0].Headers["X-Source"] != "cron" {
		t.Fatalf("first schedule: %+v", rs[0])
	}
	if rs[1].CatchUpMode != "last" || string(rs[1].PayloadData) != "\x00\x01\x02" || rs[1].Headers["X-A"] != "1" || rs[1].Spec.Every().Seconds() != 30 {
		t.Fatalf("second schedule (catch_up defaults to last): %+v", rs[1])
	}
}

func TestSchedulesRefused(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"no name", "[[schedules]]\ncron = \"@hourly\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:1: schedules[0].name: missing: every [[schedules]] entry needs name, like name = "nightly-report"`},
		{"bad cron", strings.Replace(scheduleBase, "0 3 * * *", "0 3 * *", 1),
			`sepp.toml:3: schedules[0].cron: "0 3 * *": expected exactly 5 fields, found 4`},
		{"every under a second", strings.Replace(scheduleBase, "0 3 * * *", "@every 500ms", 1),
			`sepp.toml:3: schedules[0].cron: "@every 500ms": @every 500ms is shorter than the shortest interval, 1s`},
		{"every with a fraction", strings.Replace(scheduleBase, "0 3 * * *", "@every 1500ms", 1),
			`sepp.toml:3: schedules[0].cron: "@every 1500ms": @every 1500ms is not a whole number of seconds`},
		{"zone in the cron", strings.Replace(scheduleBase, "0 3 * * *", "CRON_TZ=UTC 0 3 * * *", 1),
			`sepp.toml:3: schedules[0].cron: "CRON_TZ=UTC 0 3 * * *": must not name a zone itself: set timezone = "Europe/Berlin" instead`},
		{"unknown zone", scheduleBase + "timezone = \"Mars/Olympus\"\n",
			`sepp.toml:6: schedules[0].timezone: unknown time zone "Mars/Olympus": name an IANA zone`},
		{"both payloads", scheduleBase + "payload = \"x\"\npayload_file = \"/etc/hostname\"\n",
			`sepp.toml:7: schedules[0].payload_file: cannot be set together with payload; keep one`},
		{"missing payload file", scheduleBase + "payload_file = \"/nonexistent/p\"\n",
			`sepp.toml:6: schedules[0].payload_file: cannot be read:`},
		{"catch_up", scheduleBase + "catch_up = \"some\"\n",
			`sepp.toml:6: schedules[0].catch_up: must be "none", "last" or "all", got "some"`},
		{"duplicate name", scheduleBase + scheduleBase,
			`sepp.toml:7: schedules[1].name: duplicate name "nightly" (first at line 2); each schedule needs its own name`},
		{"queue name", strings.Replace(scheduleBase, `queue = "reports"`, `queue = " reports"`, 1),
			`sepp.toml:4: schedules[0].queue: " reports" has leading or trailing spaces`},
		{"strict", "[server]\nstrict = true\n" + scheduleBase,
			`sepp.toml:6: schedules[0].queue: queue "reports" is not declared and server.strict = true`},
		{"job type not accepted", "[[queues]]\nname = \"reports\"\njob_types = [\"a\"]\n" + scheduleBase,
			`sepp.toml:8: schedules[0].job_type: "report" is not accepted by queue "reports"`},
		{"short dedup window", "[[queues]]\nname = \"reports\"\ndedup_window_ms = 60000\n" + scheduleBase,
			`sepp.toml:7: schedules[0].queue: queue "reports" has a dedup window of 60000 ms, under the 3600000 ms (an hour)`},
		{"release_key_on", "[[queues]]\nname = \"reports\"\nrelease_key_on = [\"completed\"]\n" + scheduleBase,
			`sepp.toml:7: schedules[0].queue: queue "reports" has release_key_on`},
		{"run_again", "[[queues]]\nname = \"reports\"\nwhen_running = \"run_again\"\n" + scheduleBase,
			`sepp.toml:7: schedules[0].queue: queue "reports" has when_running = "run_again"`},
		{"header name", scheduleBase + "headers = { \"a/b\" = \"c\" }\n",
			`sepp.toml:6: schedules[0].headers: "a/b" is not a header name`},
		{"header value", scheduleBase + "headers = { a = 1 }\n",
			`sepp.toml:6: schedules[0].headers.a: must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s...", err, tc.want)
			}
		})
	}
}
