package launch

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine bounds how much of one line a rank stream buffers; a longer line
// is written in pieces of this size, each ended with a newline.
const maxLine = 64 << 10

// output serializes whole lines from every rank stream (and the
// launcher's own notices) onto the job's stdout and stderr. One mutex
// covers both writers, since they may be the same.
type output struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
	prefix bool
	// hint, if set, is asked about every stderr line of a rank; each
	// different answer is written once, for the first rank that gave
	// it, as a line of the launcher's own starting with name (see
	// Config.Hint).
	hint   func(line string) string
	name   string
	hinted map[string]bool
}

func newOutput(stdout, stderr io.Writer, prefix bool) *output {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return &output{stdout: stdout, stderr: stderr, prefix: prefix}
}

// write writes one line (with its newline) in one Write call. Errors of
// the destination are dropped: a closed terminal must not block or kill
// the ranks.
func (o *output) write(w io.Writer, line []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = w.Write(line)
}

// hintFor writes the hint for a rank's stderr line, unless it is written
// already (for this rank or another).
func (o *output) hintFor(rank int, line string) {
	h := o.hint(line)
	if h == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hinted[h] {
		return
	}
	if o.hinted == nil {
		o.hinted = map[string]bool{}
	}
	o.hinted[h] = true
	_, _ = o.stderr.Write([]byte(o.name + ": rank " + strconv.Itoa(rank) + ": " + h + "\n"))
}

// stream returns the writer one rank's stdout (or stderr) is copied into;
// file, if not nil, also receives every line, unprefixed.
func (o *output) stream(rank int, stderr bool, file io.Writer) *lineWriter {
	lw := &lineWriter{out: o, dst: o.stdout, file: file, rank: rank}
	if stderr {
		lw.dst, lw.hints = o.stderr, o.hint != nil
	}
	if o.prefix {
		lw.prefix = []byte("[" + strconv.Itoa(rank) + "] ")
	}
	return lw
}

// lineWriter cuts a byte stream into lines and writes each whole line,
// prefixed, through the shared output. It is used by one goroutine.
type lineWriter struct {
	out    *output
	dst    io.Writer
	prefix []byte
	buf    []byte    // the incomplete last line
	file   io.Writer // the rank's own log file, or nil
	rank   int
	hints  bool // the lines go through output.hint
}

// Write consumes p; it never fails.
func (lw *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexByte(p, '\n')
		if end < 0 {
			end = len(p)
		}
		take := min(end, maxLine-len(lw.buf))
		lw.buf = append(lw.buf, p[:take]...)
		p = p[take:]
		switch {
		case take == end && len(p) > 0: // p[0] is the newline
			p = p[1:]
			lw.emit()
		case len(lw.buf) == maxLine:
			lw.emit()
		}
	}
	return n, nil
}

// Flush writes a final line that lacked its newline.
func (lw *lineWriter) Flush() {
	if len(lw.buf) > 0 {
		lw.emit()
	}
}

func (lw *lineWriter) emit() {
	line := make([]byte, 0, len(lw.prefix)+len(lw.buf)+1)
	line = append(line, lw.prefix...)
	line = append(line, lw.buf...)
	line = append(line, '\n')
	lw.out.write(lw.dst, line)
	if lw.hints {
		lw.out.hintFor(lw.rank, string(lw.buf))
	}
	if lw.file != nil {
		// Only this stream writes the file; a full disk must not stop
		// the rank.
		_, _ = lw.file.Write(line[len(lw.prefix):])
	}
	lw.buf = lw.buf[:0]
}
