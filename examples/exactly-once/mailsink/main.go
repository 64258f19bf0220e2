// Command mailsink stands in for a mail provider in the exactly-once
// example: every POST /mail is a mail sent, appended as one JSON line to the
// file it owns, and answered with a receipt ("m-17") 10 to 60 ms later. It
// does not deduplicate anything, so a mail sent twice is in the file twice.
//
// Like a provider's search of sent mail, GET /mail?message_id=ID answers
// the receipt of the first mail sent with that message_id, or 404.
//
//	LISTEN=127.0.0.1:8025 MAIL_FILE=mails.jsonl mailsink
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"
)

func main() {
	path := os.Getenv("MAIL_FILE")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	n := 0                      // mails in the file so far: receipts go on from there
	sent := map[string]string{} // message_id -> the receipt of its first mail
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
		var m struct {
			MessageID string `json:"message_id"`
			Receipt   string `json:"receipt"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && sent[m.MessageID] == "" {
			sent[m.MessageID] = m.Receipt
		}
	}

	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mail", func(w http.ResponseWriter, r *http.Request) {
		var mail map[string]any
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(body, &mail)
		}
		if err != nil {
			http.Error(w, "a mail is a JSON object", http.StatusBadRequest)
			return
		}
		mu.Lock()
		n++
		receipt := fmt.Sprintf("m-%d", n)
		mail["receipt"] = receipt
		mail["received_at"] = time.Now().UTC().Format(time.RFC3339Nano)
		line, _ := json.Marshal(mail)
		if _, err := f.Write(append(line, '\n')); err != nil {
			n--
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if id, _ := mail["message_id"].(string); id != "" && sent[id] == "" {
			sent[id] = receipt
		}
		mu.Unlock()
		// The mail is sent; the answer takes a while, as a provider's API
		// does. A sender that dies meanwhile has sent it all the same.
		time.Sleep(time.Duration(10+rand.IntN(50)) * time.Millisecond)
		fmt.Fprintln(w, receipt)
	})
	mux.HandleFunc("GET /mail", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		receipt := sent[r.URL.Query().Get("message_id")]
		mu.Unlock()
		if receipt == "" {
			http.Error(w, "no mail with this message_id", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, receipt)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	slog.Info("mail sink listening", "addr", os.Getenv("LISTEN"), "file", path)
	log.Fatal(http.ListenAndServe(os.Getenv("LISTEN"), mux))
}
