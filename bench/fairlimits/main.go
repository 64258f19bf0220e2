// Command fairlimits replays the "fair limits" probes of issue 22 against a
// `sepp serve` process on a fresh data directory, with the default
// configuration, and prints what the server did:
//
//	longpolls  110 connections from 127.0.0.1, each with 100 Reserve calls
//	           waiting 25 s (11,000 in all, over limits.max_long_polls),
//	           then a waiting Reserve from 127.0.0.2: is it admitted and
//	           served?
//	metrics    one job on each of 20,000 new queues (strict = false), then
//	           /metrics: its lines, bytes and scrape time, and another
//	           client's enqueue latency while two clients scrape in a loop
//	refusal    Reserve calls naming 20,000 queues, one after the other on
//	           one connection for 10 s, each refused over
//	           limits.max_reserve_queues: the server's CPU time per
//	           refusal, and another client's enqueue latency meanwhile;
//	           then the same for an Enqueue as large (refused for its
//	           empty job type) and for a Reserve naming 101 queues, the
//	           floor of a refused call
//
//	go build -o /tmp/sepp ./cmd/sepp
//	go run ./bench/fairlimits -sepp /tmp/sepp -run longpolls,metrics,refusal
//
// Without -sepp it builds ./cmd/sepp itself (run it from the repository
// root). Linux
// only: it reads the server's CPU time from /proc, and dials from
// 127.0.0.2, which Linux routes to the loopback interface.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

func main() {
	bin := flag.String("sepp", "", "sepp binary to serve with (empty: go build ./cmd/sepp)")
	run := flag.String("run", "all", "the probes to run, comma-separated: longpolls, metrics, refusal (or all)")
	flag.Parse()
	probes := map[string]func(*server) error{
		"longpolls": longPolls,
		"metrics":   metrics,
		"refusal":   refusal,
	}
	order := []string{"longpolls", "metrics", "refusal"}
	names := order
	if *run != "all" {
		names = strings.Split(*run, ",")
	}
	for _, name := range names {
		probe, ok := probes[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "fairlimits: no probe %q; the probes are %s\n", name, strings.Join(order, ", "))
			os.Exit(2)
		}
		if err := withServer(*bin, probe); err != nil {
			fmt.Fprintf(os.Stderr, "fairlimits: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

// server is a running `sepp serve` process.
type server struct {
	pid  int
	addr string
}

// withServer starts `sepp serve` with the defaults on a fresh directory,
// runs probe against it, and stops it.
func withServer(bin string, probe func(*server) error) error {
	dir, err := os.MkdirTemp("", "sepp-fairlimits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "sepp")
		build := exec.Command("go", "build", "-o", bin, "./cmd/sepp")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/sepp: %w", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SEPP_LISTEN="+addr, "SEPP_STORAGE_PATH="+filepath.Join(dir, "data"))
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	s := &server{pid: cmd.Process.Pid, addr: addr}
	if err := s.ready(); err != nil {
		return err
	}
	return probe(s)
}

// ready waits until the server answers an enqueue.
func (s *server) ready() error {
	jobs := seppv1.NewJobServiceClient(s.dial("127.0.0.1"))
	var last error
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, last = jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "ping", JobType: "t"})
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the server did not answer: %w", last)
}

// dial opens a gRPC connection to the server from the local address ip.
func (s *server) dial(ip string) *grpc.ClientConn {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		panic(err) // only for a malformed target
	}
	return conn
}

// cpu is the server's CPU time so far (utime + stime from /proc/PID/stat).
func (s *server) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its ')' are fixed.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", s.pid)
	}
	const hz = 100 // USER_HZ: clock ticks per second on Linux
	return time.Duration(u+k) * time.Second / hz, nil
}

// limitOf is the limit metadata of a LIMIT_EXCEEDED error, or the error's
// code when it is another error.
func limitOf(err error) string {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "LIMIT_EXCEEDED" {
			return info.GetMetadata()["limit"]
		}
	}
	return st.Code().String()
}

// longPolls: 110 connections × 100 waiting Reserve calls from 127.0.0.1,
// then a waiting Reserve from 127.0.0.2 and an enqueue for it.
func longPolls(s *server) error {
	const conns, perConn = 110, 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		refused = map[string]int{}
		wg      sync.WaitGroup
	)
	for range conns {
		conn := s.dial("127.0.0.1")
		defer conn.Close()
		w := seppv1.NewWorkerServiceClient(conn)
		for range perConn {
			wg.Go(func() {
				// A refusal comes back at once; an admitted call waits 25 s
				// (until the probe ends).
				_, err := w.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 25000})
				if err != nil && ctx.Err() == nil {
					mu.Lock()
					refused[limitOf(err)]++
					mu.Unlock()
				}
			})
		}
	}
	// A refusal comes back at once: once none came for a second, the rest
	// are waiting.
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range refused {
			n += v
		}
		return n
	}
	for last := -1; last != total(); {
		last = total()
		time.Sleep(time.Second)
	}
	mu.Lock()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(refused)) {
		fmt.Printf("  refused over %s: %d\n", k, refused[k])
		n += refused[k]
	}
	mu.Unlock()
	fmt.Printf("127.0.0.1: %d connections × %d waiting Reserve calls: %d waiting, %d refused\n", conns, perConn, conns*perConn-n, n)

	other := s.dial("127.0.0.2")
	defer other.Close()
	start := time.Now()
	got := make(chan error, 1)
	go func() {
		res, err := seppv1.NewWorkerServiceClient(other).Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"work"}, WaitMs: 25000})
		if err == nil && len(res.GetJobs()) != 1 {
			err = fmt.Errorf("got %d jobs", len(res.GetJobs()))
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it wait
	if _, err := seppv1.NewJobServiceClient(other).Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "work", JobType: "t"}); err != nil {
		return err
	}
	if err := <-got; err != nil {
		fmt.Printf("127.0.0.2: waiting Reserve NOT served: %v\n", err)
	} else {
		fmt.Printf("127.0.0.2: waiting Reserve served the job enqueued 200 ms after it (%v in all)\n", time.Since(start).Round(time.Millisecond))
	}
	cancel()
	wg.Wait()
	return nil
}

// metrics: one job on each of 20,000 new queues, then /metrics.
func metrics(s *server) error {
	const queues, batch = 20000, 1000
	ctx := context.Background()
	conn := s.dial("127.0.0.1")
	defer conn.Close()
	jobs := seppv1.NewJobServiceClient(conn)
	for i := 0; i < queues; i += batch {
		req := &seppv1.EnqueueBatchRequest{}
		for k := i; k < i+batch; k++ {
			req.Jobs = append(req.Jobs, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("new-%05d", k), JobType: "t"})
		}
		if _, err := jobs.EnqueueBatch(ctx, req); err != nil {
			return err
		}
	}
	url := "http://" + s.addr + "/metrics"
	var lines, size int
	var took []time.Duration
	for range 5 {
		start := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		took = append(took, time.Since(start))
		lines, size = bytes.Count(body, []byte("\n")), len(body)
	}
	slices.Sort(took)
	fmt.Printf("/metrics after one job on each of %d new queues: %d lines, %d bytes, scrape median %v\n",
		queues, lines, size, took[len(took)/2].Round(100*time.Microsecond))

	victim := seppv1.NewJobServiceClient(s.dial("127.0.0.2"))
	quiet := enqueueP50(ctx, victim, 500)
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for sctx.Err() == nil {
				if resp, err := http.Get(url); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	loaded := enqueueP50(ctx, victim, 500)
	stop()
	wg.Wait()
	fmt.Printf("another client's enqueue p50: %v without scrapers, %v while two clients scrape in a loop\n", quiet, loaded)
	return nil
}

// enqueueP50 runs n enqueues one after the other and returns their median.
func enqueueP50(ctx context.Context, jobs seppv1.JobServiceClient, n int) time.Duration {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "victim", JobType: "t",
			IdempotencyKey: proto.String(fmt.Sprintf("v-%d-%d", time.Now().UnixNano(), i))}); err != nil {
			fmt.Fprintln(os.Stderr, "enqueue:", err)
			continue
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat[len(lat)/2].Round(10 * time.Microsecond)
}

// refusal: Reserve calls naming 20,000 queues, one after the other for
// 10 s, and the server's CPU time per refusal; then, for the cost of
// receiving as many bytes, Enqueue calls as large (a payload of the same
// size) refused for their empty job type; and, for what any refused call
// costs, Reserve calls naming 101 queues.
func refusal(s *server) error {
	const queues = 20000
	reserve := &seppv1.ReserveRequest{WaitMs: 1000}
	for i := range queues {
		reserve.Queues = append(reserve.Queues, fmt.Sprintf("queue-%05d", i))
	}
	size := proto.Size(reserve)
	enqueue := &seppv1.EnqueueRequest{Queue: "q", Payload: make([]byte, size)}
	ctx := context.Background()
	conn := s.dial("127.0.0.1")
	defer conn.Close()
	w, jobs := seppv1.NewWorkerServiceClient(conn), seppv1.NewJobServiceClient(conn)
	victim := seppv1.NewJobServiceClient(s.dial("127.0.0.2"))
	quiet := enqueueP50(ctx, victim, 500)
	perCall, loaded, n, err := s.perRefusal(ctx, victim, func(ctx context.Context) error {
		_, err := w.Reserve(ctx, reserve)
		if limitOf(err) != "limits.max_reserve_queues" {
			return fmt.Errorf("Reserve of %d queues: %v", queues, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("Reserve naming %d queues (%d bytes), refused %d times in 10 s on one connection: server CPU %v per refusal\n",
		queues, size, n, perCall)
	fmt.Printf("another client's enqueue p50: %v before, %v during\n", quiet, loaded)
	perCall, _, n, err = s.perRefusal(ctx, victim, func(ctx context.Context) error {
		_, err := jobs.Enqueue(ctx, enqueue)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument {
			return fmt.Errorf("Enqueue without a job type: %v", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("for comparison, Enqueue of the same size (%d bytes) refused for its empty job type, %d times: server CPU %v per refusal\n",
		proto.Size(enqueue), n, perCall)
	small := &seppv1.ReserveRequest{Queues: reserve.Queues[:101], WaitMs: 1000}
	perCall, _, n, err = s.perRefusal(ctx, victim, func(ctx context.Context) error {
		_, err := w.Reserve(ctx, small)
		if limitOf(err) != "limits.max_reserve_queues" {
			return fmt.Errorf("Reserve of 101 queues: %v", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("and the floor, a Reserve naming 101 queues (%d bytes), refused %d times: server CPU %v per refusal\n",
		proto.Size(small), n, perCall)
	return nil
}

// perRefusal runs call, one after the other, for 10 s while victim
// enqueues, and returns the server's CPU time per call, the victim's
// enqueue p50 and the calls made. The victim's 500 enqueues are counted
// in the CPU time.
func (s *server) perRefusal(ctx context.Context, victim seppv1.JobServiceClient, call func(context.Context) error) (time.Duration, time.Duration, int, error) {
	before, err := s.cpu()
	if err != nil {
		return 0, 0, 0, err
	}
	actx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	n := 0
	done := make(chan error, 1)
	go func() {
		for {
			err := call(actx)
			// grpc-go may end the call on its own timer a moment before
			// the context says it is done.
			if actx.Err() != nil || strings.Contains(fmt.Sprint(err), "DeadlineExceeded") {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			n++
		}
	}()
	loaded := enqueueP50(ctx, victim, 500)
	if err := <-done; err != nil {
		return 0, 0, 0, err
	}
	after, err := s.cpu()
	if err != nil {
		return 0, 0, 0, err
	}
	return ((after - before) / time.Duration(n)).Round(time.Microsecond), loaded, n, nil
}
