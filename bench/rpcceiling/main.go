// Command rpcceiling measures the ceiling of an empty unary RPC
// (sepp.v1.JobService/GetJob with a no-op handler that returns an empty
// GetJobResponse) for the serving stacks Sepp could ship, so that the cost of
// the RPC layer alone is known before any storage work is added on top.
//
// Servers (each on its own random loopback port, 127.0.0.1:0):
//
//   - A: grpc-go's own server (grpc.NewServer).
//   - B: the connect-go handler served by net/http with cleartext HTTP/2,
//     once through golang.org/x/net/http2/h2c and once through net/http's
//     built-in support (http.Server.Protocols with SetUnencryptedHTTP2).
//   - C: what Sepp ships: one TCP listener split by [seppserver.PrefaceSplitter].
//     Connections that open with the HTTP/2 client preface go to the grpc-go
//     server of A; all others (HTTP/1.1) go to a net/http server with the
//     connect-go handler, so Connect JSON (curl) and gRPC-Web work too.
//
// Clients:
//
//   - grpc-go (grpc.NewClient, insecure credentials, HTTP/2): N concurrent
//     callers share one client connection; N = 1, 32, 64 by default.
//   - connect-go, Connect protocol, JSON codec, over HTTP/1.1 (the path curl
//     and browsers take): 32 callers over a pool of keep-alive connections.
//
// Client and server run in ONE process, so they share GOMAXPROCS (all cores of
// the machine); the numbers are the ceiling of the whole round trip on this
// machine, not of the server alone. Each case runs a warm-up (-warmup, 1s)
// and then a fixed measuring window (-duration, 5s); latency is measured per
// call by the caller. With -rounds N the whole set is repeated N times
// (rounds outermost) and each row reports the round with the median calls/s.
// Per-round results go to stderr together with "other load": the share of
// the machine's CPU used by other processes during the window (from
// /proc/stat). Rounds where that exceeds 10% count as disturbed and are left
// out of the median while undisturbed rounds exist; the table's footer says
// how many rounds each row used.
// The program then prints a markdown table (server, client, callers,
// calls/s, p50, p99) to stdout and exits; one round takes about
// 15 x (warm-up + duration), ~90s with the defaults.
//
// Run:
//
//	go run ./bench/rpcceiling                      # full table, ~90s
//	go run ./bench/rpcceiling -rounds 3            # median of 3, ~4.5min
//	go run ./bench/rpcceiling -duration 2s -only C # quicker, server C only
//	go run ./bench/rpcceiling -serve               # run server C until killed
//
// With -serve, the program listens on -addr (default a random loopback port),
// prints the address and serves server C until SIGINT/SIGTERM, e.g. for
//
//	curl -s -X POST -H 'Content-Type: application/json' -d '{}' \
//	    http://127.0.0.1:PORT/sepp.v1.JobService/GetJob
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	seppserver "github.com/sepp-dev/sepp/internal/server"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
)

func main() {
	var (
		duration  = flag.Duration("duration", 5*time.Second, "measuring window per case")
		warmup    = flag.Duration("warmup", time.Second, "warm-up per case (not measured)")
		callersF  = flag.String("callers", "1,32,64", "comma-separated numbers of concurrent grpc-go callers")
		connectN  = flag.Int("connect-callers", 32, "concurrent callers for the connect-go HTTP/1.1 JSON client (0 = skip)")
		only      = flag.String("only", "", "run only servers whose name matches this regexp (e.g. 'A|C')")
		rounds    = flag.Int("rounds", 1, "repeat the whole set this many times; each row reports the round with the median calls/s among undisturbed rounds")
		serve     = flag.Bool("serve", false, "run server C on -addr until killed, instead of benchmarking")
		serveAddr = flag.String("addr", "127.0.0.1:0", "listen address for -serve")
	)
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("rpcceiling: ")

	if *serve {
		if err := serveUntilSignal(*serveAddr); err != nil {
			log.Fatal(err)
		}
		return
	}

	var callers []int
	for f := range strings.SplitSeq(*callersF, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("bad -callers entry %q", f)
		}
		callers = append(callers, n)
	}
	filter, err := regexp.Compile(*only)
	if err != nil {
		log.Fatalf("bad -only: %v", err)
	}
	if *rounds < 1 {
		log.Fatal("-rounds must be at least 1")
	}

	// The table's rows, in order, each with one result per round.
	type row struct {
		srv     server
		cc      clientCase
		results []result
	}
	var rows []*row
	for _, srv := range servers {
		if !filter.MatchString(srv.name) {
			continue
		}
		if srv.grpc {
			for _, n := range callers {
				rows = append(rows, &row{srv: srv, cc: clientCase{"grpc-go (HTTP/2)", n, newGRPCCaller}})
			}
		}
		if srv.connect && *connectN > 0 {
			rows = append(rows, &row{srv: srv, cc: clientCase{"connect-go JSON (HTTP/1.1)", *connectN, newConnectJSONCaller}})
		}
	}

	// Rounds are the outer loop, so that a burst of load from elsewhere on
	// the machine hits one round of every server rather than every round of
	// one server. Each server is started afresh for its cases in a round.
	failed := false
	for round := 1; round <= *rounds; round++ {
		for i := 0; i < len(rows); {
			srv := rows[i].srv
			addr, stop, err := srv.start("127.0.0.1:0")
			if err != nil {
				log.Fatalf("%s: %v", srv.name, err)
			}
			for ; i < len(rows) && rows[i].srv.name == srv.name; i++ {
				r := rows[i]
				res, err := runCase(addr, r.cc, *warmup, *duration)
				if err != nil {
					log.Printf("round %d: %s / %s / %d callers: %v", round, srv.name, r.cc.client, r.cc.callers, err)
					failed = true
					continue
				}
				r.results = append(r.results, res)
				log.Printf("round %d: %s / %s / %d callers: %s calls/s, p50 %s, p99 %s, other load %s",
					round, srv.name, r.cc.client, r.cc.callers, groupThousands(res.perSecond()),
					fmtLatency(res.p50), fmtLatency(res.p99), fmtLoad(res.otherLoad))
			}
			stop()
		}
	}

	fmt.Printf("<!-- %s, %s/%s, NumCPU=%d, GOMAXPROCS=%d, client+server in one process, warm-up %v, window %v, median of the undisturbed of %d round(s) -->\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), *warmup, *duration, *rounds)
	fmt.Println("| server | client | callers | calls/s | p50 | p99 |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	var used []string
	for _, r := range rows {
		if len(r.results) == 0 {
			fmt.Printf("| %s | %s | %d | failed | | |\n", r.srv.name, r.cc.client, r.cc.callers)
			used = append(used, "0/0")
			continue
		}
		// The row shows the round with the median throughput (the lower
		// middle one for an even count), with that round's latencies. Rounds
		// disturbed by other processes are left out while undisturbed ones
		// exist; rounds whose other load is unknown are kept.
		quiet := slices.DeleteFunc(slices.Clone(r.results), func(x result) bool {
			return x.otherLoad > maxOtherLoad
		})
		pick := quiet
		if len(quiet) == 0 {
			pick = r.results
			log.Printf("warning: %s / %s / %d callers: every round was disturbed by other processes (other load > %s)",
				r.srv.name, r.cc.client, r.cc.callers, fmtLoad(maxOtherLoad))
		}
		slices.SortFunc(pick, func(a, b result) int { return cmp.Compare(a.calls, b.calls) })
		m := pick[(len(pick)-1)/2]
		fmt.Printf("| %s | %s | %d | %s | %s | %s |\n", r.srv.name, r.cc.client, r.cc.callers,
			groupThousands(m.perSecond()), fmtLatency(m.p50), fmtLatency(m.p99))
		used = append(used, fmt.Sprintf("%d/%d", len(pick), len(r.results)))
	}
	fmt.Printf("\n<!-- rounds used per row (undisturbed/total): %s -->\n", strings.Join(used, " "))
	if failed {
		os.Exit(1)
	}
}

// ---- service implementations ----

// grpcJobs is a no-op grpc-go JobService.
type grpcJobs struct {
	seppv1.UnimplementedJobServiceServer
}

func (grpcJobs) GetJob(context.Context, *seppv1.GetJobRequest) (*seppv1.GetJobResponse, error) {
	return &seppv1.GetJobResponse{}, nil
}

// connectJobs is a no-op connect-go JobService (stubs generated with the
// "simple" option: plain messages in and out, like grpc-go's).
type connectJobs struct {
	seppv1connect.UnimplementedJobServiceHandler
}

func (connectJobs) GetJob(context.Context, *seppv1.GetJobRequest) (*seppv1.GetJobResponse, error) {
	return &seppv1.GetJobResponse{}, nil
}

func newGRPCServer() *grpc.Server {
	s := grpc.NewServer()
	seppv1.RegisterJobServiceServer(s, grpcJobs{})
	return s
}

func newConnectMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(seppv1connect.NewJobServiceHandler(connectJobs{}))
	return mux
}

// ---- servers ----

type server struct {
	name    string
	grpc    bool // benchmark with the grpc-go client
	connect bool // benchmark with the connect-go HTTP/1.1 JSON client
	start   func(addr string) (listenAddr string, stop func(), err error)
}

var servers = []server{
	{"A grpc-go", true, false, startGRPC},
	{"B connect-go, x/net h2c", true, true, startConnectH2C},
	{"B connect-go, net/http Protocols", true, true, startConnectProtocols},
	{"C split: grpc-go + net/http", true, true, startSplit},
}

func startGRPC(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	s := newGRPCServer()
	go s.Serve(ln)
	return ln.Addr().String(), s.Stop, nil
}

func startHTTP(addr string, hs *http.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	go hs.Serve(ln)
	return ln.Addr().String(), func() { hs.Close() }, nil
}

func startConnectH2C(addr string) (string, func(), error) {
	return startHTTP(addr, &http.Server{
		Handler:           h2c.NewHandler(newConnectMux(), &http2.Server{}),
		ReadHeaderTimeout: 10 * time.Second,
	})
}

func startConnectProtocols(addr string) (string, func(), error) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return startHTTP(addr, &http.Server{
		Handler:           newConnectMux(),
		Protocols:         p,
		ReadHeaderTimeout: 10 * time.Second,
	})
}

// startSplit starts server C: one listener, HTTP/2-preface connections to
// grpc-go, everything else to net/http (HTTP/1.1 only) with connect-go.
func startSplit(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	sp := seppserver.NewPrefaceSplitter(ln, 10*time.Second)
	gs := newGRPCServer()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	hs := &http.Server{
		Handler:           newConnectMux(),
		Protocols:         p,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go gs.Serve(sp.HTTP2())
	go hs.Serve(sp.Other())
	go sp.Serve()
	stop := func() {
		sp.Close()
		gs.Stop()
		hs.Close()
	}
	return ln.Addr().String(), stop, nil
}

func serveUntilSignal(addr string) error {
	listenAddr, stop, err := startSplit(addr)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("serving server C (grpc-go on HTTP/2 preface, connect-go on HTTP/1.1) on %s\n", listenAddr)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	<-ctx.Done()
	return nil
}

// ---- clients ----

// caller makes one GetJob call; close releases the client's connections.
type caller struct {
	call  func(context.Context) error
	close func()
}

type clientCase struct {
	client  string
	callers int
	newCall func(addr string, callers int) (caller, error)
}

// newGRPCCaller returns a grpc-go client: all callers share one ClientConn,
// i.e. one HTTP/2 connection.
func newGRPCCaller(addr string, _ int) (caller, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return caller{}, err
	}
	c := seppv1.NewJobServiceClient(cc)
	req := &seppv1.GetJobRequest{}
	return caller{
		call: func(ctx context.Context) error {
			_, err := c.GetJob(ctx, req)
			return err
		},
		close: func() { cc.Close() },
	}, nil
}

// newConnectJSONCaller returns a connect-go client speaking the Connect
// protocol with the JSON codec over HTTP/1.1, keeping up to one idle
// keep-alive connection per caller (as curl in a loop with keep-alive would).
func newConnectJSONCaller(addr string, callers int) (caller, error) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{
		Protocols:           p,
		MaxIdleConns:        callers,
		MaxIdleConnsPerHost: callers,
		IdleConnTimeout:     time.Minute,
	}
	c := seppv1connect.NewJobServiceClient(&http.Client{Transport: tr}, "http://"+addr, connect.WithProtoJSON())
	return caller{
		call: func(ctx context.Context) error {
			_, err := c.GetJob(ctx, &seppv1.GetJobRequest{})
			return err
		},
		close: tr.CloseIdleConnections,
	}, nil
}

// ---- measurement ----

type result struct {
	calls    int
	window   time.Duration
	p50, p99 time.Duration
	// otherLoad is the share of the machine's CPU capacity used during the
	// window by everything except this process (including steal time on a
	// VM); -1 if unknown. It flags numbers disturbed by other work.
	otherLoad float64
}

func (r result) perSecond() float64 { return float64(r.calls) / r.window.Seconds() }

// runCase runs cc.callers goroutines calling in a closed loop for warmup +
// window. Only calls that start inside the window are counted and timed.
func runCase(addr string, cc clientCase, warmup, window time.Duration) (result, error) {
	cl, err := cc.newCall(addr, cc.callers)
	if err != nil {
		return result{}, err
	}
	defer cl.close()

	// A hard deadline keeps the run bounded even if a call hangs.
	ctx, cancel := context.WithTimeout(context.Background(), warmup+window+10*time.Second)
	defer cancel()

	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(window)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
	)
	loadc := make(chan float64, 1)
	go func() { loadc <- measureOtherLoad(ctx, measureFrom, end) }()
	for range cc.callers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1<<14)
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				if err := cl.call(ctx); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				if !t0.Before(measureFrom) {
					lat = append(lat, time.Since(t0))
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	if len(all) == 0 {
		return result{}, errors.New("no calls completed in the measuring window")
	}
	slices.SortFunc(all, cmp.Compare)
	return result{
		calls:     len(all),
		window:    window,
		p50:       all[len(all)*50/100],
		p99:       all[len(all)*99/100],
		otherLoad: <-loadc,
	}, nil
}

// measureOtherLoad returns the share of the machine's CPU capacity that was
// busy between from and to but not spent in this process: Linux /proc/stat
// busy time (including steal) minus this process's user+system time, divided
// by wall time x NumCPU. It returns -1 when that cannot be measured.
func measureOtherLoad(ctx context.Context, from, to time.Time) float64 {
	sleepUntil := func(t time.Time) bool {
		select {
		case <-time.After(time.Until(t)):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !sleepUntil(from) {
		return -1
	}
	busy0, ok0 := machineBusy()
	self0 := selfCPU()
	t0 := time.Now()
	if !sleepUntil(to) {
		return -1
	}
	busy1, ok1 := machineBusy()
	self1 := selfCPU()
	wall := time.Since(t0)
	if !ok0 || !ok1 || wall <= 0 {
		return -1
	}
	other := (busy1 - busy0) - (self1 - self0)
	return max(0, float64(other)/(float64(wall)*float64(runtime.NumCPU())))
}

// maxOtherLoad is the share of the machine's CPU that other processes may
// use during a window before the round counts as disturbed.
const maxOtherLoad = 0.10

// clockTicks is USER_HZ, the unit of /proc/stat; 100 on every mainstream
// Linux configuration.
const clockTicks = 100

// machineBusy returns the non-idle CPU time of the whole machine from
// /proc/stat (user, nice, system, irq, softirq, steal).
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // skip idle (4) and iowait (5)
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// selfCPU returns the user+system CPU time used by this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fmtLoad(v float64) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func fmtLatency(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 1000 {
		return fmt.Sprintf("%.0f µs", us)
	}
	return fmt.Sprintf("%.2f ms", us/1000)
}

// groupThousands formats v rounded to an integer with comma separators.
func groupThousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
