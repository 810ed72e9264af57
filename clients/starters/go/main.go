// The smallest complete All Fours Arena bot: Go, standard library only.
//
// It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the
// view, send one of its legal_actions with the view's version and a new Idempotency-Key,
// and keep that key for every retry of that action; wait Retry-After on 429/503; a lost
// connection is retried with the same key; a 409 means "look again". Two seats in one
// game need nothing more: GET /games/{id} shows the seat whose turn it is.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	mrand "math/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

var (
	base   = strings.TrimRight(getenv("ARENA_URL", "http://127.0.0.1:8000"), "/")
	token  = os.Getenv("ARENA_TOKEN")
	client = &http.Client{Timeout: 45 * time.Second}
)

type View struct {
	Status       string   `json:"status"`
	YourTurn     bool     `json:"your_turn"`
	Version      int      `json:"version"`
	Seat         *int     `json:"seat"`
	LegalActions []string `json:"legal_actions"`
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// call sends one request, retried the same way (same key) until the service answers it,
// and decodes the JSON answer into out.
func call(method, path string, body any, key string, out any) int {
	var data []byte
	if body != nil {
		data, _ = json.Marshal(body)
	}
	for attempt := 0; attempt < 60; attempt++ {
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil { // no answer (refused, reset, timed out): the same request again
			time.Sleep(time.Duration(min(5000, 250<<attempt)) * time.Millisecond)
			continue
		}
		if resp.StatusCode == 429 || resp.StatusCode == 503 { // nothing applied: wait as told
			resp.Body.Close()
			wait, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
			if err != nil {
				wait = 1
			}
			time.Sleep(time.Duration(wait * float64(time.Second)))
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(out)
		resp.Body.Close()
		if err != nil { // cut mid-answer: the same request again
			continue
		}
		return resp.StatusCode
	}
	log.Fatalf("%s %s: no answer", method, path)
	return 0
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func choose(v View) string { // your strategy goes here
	return v.LegalActions[mrand.Intn(len(v.LegalActions))]
}

func play(game string) {
	var view View
	status := call("GET", "/games/"+game, nil, "", &view)
	for status == 200 && view.Status == "active" && view.YourTurn {
		body := map[string]any{"action": choose(view), "version": view.Version, "seat": view.Seat}
		var answer json.RawMessage
		code := call("POST", "/games/"+game+"/actions", body, newKey(), &answer)
		switch {
		case code == 200: // this seat's view right after the move
			view = View{}
			_ = json.Unmarshal(answer, &view)
		case code == 409 || code == 412: // the game moved on: look again
			view = View{}
			status = call("GET", "/games/"+game, nil, "", &view)
		default:
			fmt.Fprintf(os.Stderr, "game %s: %d %s\n", game, code, answer)
			return
		}
	}
}

func main() {
	mrand.Seed(time.Now().UnixNano())
	for {
		var turns struct {
			Games       []string `json:"games"`
			Invitations []struct {
				ID string `json:"id"`
			} `json:"invitations"`
		}
		if status := call("GET", "/bots/me/turns?timeout=20", nil, "", &turns); status != 200 {
			log.Fatalf("GET /bots/me/turns: %d", status)
		}
		// another owner's bot asks for a game: accept (or POST .../decline; unanswered, it
		// expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
		for _, inv := range turns.Invitations {
			var ignored map[string]any
			call("POST", "/invitations/"+inv.ID+"/accept", map[string]any{}, newKey(), &ignored)
		}
		for _, game := range turns.Games {
			play(game)
		}
	}
}
