package obs

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
)

// Trace threads (the "tid" of trace events) of a rank's timeline.
const (
	tidCollectives = 1
	tidSteps       = 2
)

// timeline writes one rank's Chrome trace-event file (JSON Array Format,
// which Perfetto and chrome://tracing open): "[", events separated by
// commas, "]" on close. A process killed before close leaves the array
// unclosed, which both viewers and Merge accept. Timestamps are
// microseconds since base on the monotonic clock; base's wall-clock time
// is written in the process_name metadata (args.clock_base_unix_ns) so
// that Merge can put the ranks on one clock.
type timeline struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	buf   []byte // the event being written
	n     int    // events written
	base  time.Time
	pid   int
	err   error // the first write error; later writes are skipped
	close bool
}

func openTimeline(path string, rank int, host string, base time.Time) (*timeline, error) {
	f, err := fsperm.Create(path)
	if err != nil {
		return nil, fmt.Errorf("obs: timeline: %w", err)
	}
	t := &timeline{f: f, w: bufio.NewWriterSize(f, 256<<10), buf: make([]byte, 0, 1024), base: base, pid: rank}
	t.w.WriteString("[\n")
	t.mu.Lock()
	t.meta("process_name", 0, fmt.Sprintf("rank %d (%s)", rank, host), base.UnixNano(), host)
	t.meta("process_sort_index", 0, "", int64(rank), "")
	t.meta("thread_name", tidCollectives, "collectives", -1, "")
	t.meta("thread_name", tidSteps, "training steps", -1, "")
	t.mu.Unlock()
	return t, nil
}

// us appends t as microseconds since the base, with nanosecond digits.
func (t *timeline) us(b []byte, at time.Time) []byte {
	return appendMicros(b, at.Sub(t.base))
}

func appendMicros(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Microsecond), 10)
	ns := int64(d % time.Microsecond)
	return append(b, '.', byte('0'+ns/100), byte('0'+ns/10%10), byte('0'+ns%10))
}

// begin starts an event with its name, category and phase letter.
func (t *timeline) begin(name, cat string, ph byte, tid int) []byte {
	b := t.buf[:0]
	b = append(b, `{"name":`...)
	b = appendJSONString(b, name)
	if cat != "" {
		b = append(b, `,"cat":"`...)
		b = append(b, cat...)
		b = append(b, '"')
	}
	b = append(b, `,"ph":"`...)
	b = append(b, ph, '"')
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(t.pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	return b
}

// end closes the event begun in b and writes it.
func (t *timeline) end(b []byte) {
	b = append(b, '}')
	t.buf = b
	if t.err != nil || t.close {
		return
	}
	if t.n > 0 {
		t.w.WriteString(",\n")
	}
	if _, err := t.w.Write(b); err != nil {
		t.err = err
	}
	t.n++
}

// meta writes a metadata ("M") event; clock ≥ 0 adds clock_base_unix_ns
// and the host to process_name, and an empty value writes sort_index
// instead of name.
func (t *timeline) meta(name string, tid int, value string, clock int64, host string) {
	b := t.begin(name, "", 'M', tid)
	b = append(b, `,"args":{`...)
	if value == "" {
		b = append(b, `"sort_index":`...)
		b = strconv.AppendInt(b, clock, 10)
	} else {
		b = append(b, `"name":`...)
		b = appendJSONString(b, value)
		if clock >= 0 && name == "process_name" {
			b = append(b, `,"clock_base_unix_ns":`...)
			b = strconv.AppendInt(b, clock, 10)
			b = append(b, `,"host":`...)
			b = appendJSONString(b, host)
		}
	}
	b = append(b, '}')
	t.end(b)
}

// span appends a complete ("X") event's timing fields.
func (t *timeline) span(b []byte, from, to time.Time) []byte {
	return t.spanSince(b, from.Sub(t.base), to.Sub(t.base))
}

// spanSince is span with times given since the base.
func (t *timeline) spanSince(b []byte, from, to time.Duration) []byte {
	b = append(b, `,"ts":`...)
	b = appendMicros(b, from)
	b = append(b, `,"dur":`...)
	return appendMicros(b, max(to-from, 0))
}

// flush writes buffered events to the file.
func (t *timeline) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.close {
		return t.err
	}
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// closeFile ends the array and closes the file.
func (t *timeline) closeFile() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.close {
		return t.err
	}
	t.close = true
	t.w.WriteString("\n]\n")
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	if err := t.f.Close(); err != nil && t.err == nil {
		t.err = err
	}
	if t.err != nil {
		return fmt.Errorf("obs: timeline: %w", t.err)
	}
	return nil
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
