package event

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What happened.
const (
	Started   = "started"   // the process runs (PID set)
	Ready     = "ready"     // the communicator formed
	Begin     = "begin"     // about to run collective Step
	Failed    = "failed"    // a collective returned an error (Err, Blamed, Kind, Reporter)
	Wrong     = "wrong"     // a collective returned success with a wrong result (Err says how)
	Done      = "done"      // every collective ran and checked out
	Setup     = "setup"     // the job could not be joined (Err)
	Listening = "listening" // shard-service: serving on Addr
	// Terminated: the launcher asked the rank to stop (SIGTERM) after
	// another rank failed. The rank carries on until its own collective
	// fails, so that its own verdict on the fault is heard; the launcher
	// kills it after its grace period.
	Terminated = "terminated"
)

// Event is one line.
type Event struct {
	Ev       string `json:"ev"`
	Rank     int    `json:"rank"`
	Step     int    `json:"step,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Err      string `json:"err,omitempty"`
	Blamed   int    `json:"blamed,omitempty"` // -1: none; only meaningful on Failed
	Kind     string `json:"kind,omitempty"`
	Reporter int    `json:"reporter,omitempty"`
	Addr     string `json:"addr,omitempty"`
	N        int    `json:"n,omitempty"`
	// UnixNano is when the worker wrote the line.
	UnixNano int64 `json:"t"`
}

// Time returns when the event was written.
func (e Event) Time() time.Time { return time.Unix(0, e.UnixNano) }

// Writer writes events as JSON lines; it is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{enc: json.NewEncoder(w)} }

// Emit stamps e with the time and writes it.
func (w *Writer) Emit(e Event) {
	e.UnixNano = time.Now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e)
}

// ParseLine parses one line of `ringtail run`'s stdout: "[rank] {json}".
// ok is false for lines that are not events.
func ParseLine(line string) (e Event, ok bool, err error) {
	if !strings.HasPrefix(line, "[") {
		return Event{}, false, nil
	}
	end := strings.Index(line, "] ")
	if end < 0 {
		return Event{}, false, nil
	}
	rank, err := strconv.Atoi(line[1:end])
	if err != nil {
		return Event{}, false, nil
	}
	body := line[end+2:]
	if !strings.HasPrefix(body, "{") {
		return Event{}, false, nil
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Event{}, false, fmt.Errorf("event: rank %d: %w", rank, err)
	}
	if e.Ev != Started && e.Ev != Setup && e.Rank != rank {
		return Event{}, false, fmt.Errorf("event: line of rank %d reports rank %d", rank, e.Rank)
	}
	e.Rank = rank
	return e, true, nil
}
