// Command goapp is an app's own HTTP API behind the Go idempotency
// middleware, for the Python client's tests: a Go app and a Python app that
// share a scope replay each other's answers.
//
//	goapp SEPP_ADDR LISTEN_ADDR SCOPE
//
// POST /orders creates an order (counted) and answers 201 with its number
// and a Location (with characters Go's JSON escapes); GET /state says how many times it ran. It prints
// "listening" once it accepts connections.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/idempotency"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: goapp SEPP_ADDR LISTEN_ADDR SCOPE")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := sepp.NewClient(ctx, os.Args[1], sepp.Config{})
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	var runs atomic.Int64
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d?from=go&v=<1>", n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d,"app":"go","request":%q}`, n, body)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(c, idempotency.Options{Scope: os.Args[3], Required: true})(create))
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"runs":%d}`, runs.Load())
	})
	ln, err := net.Listen("tcp", os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening")
	log.Fatal(http.Serve(ln, mux))
}
