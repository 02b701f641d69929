package straggler

import "time"

// window is a sliding window over the last len(buf) durations of one rank,
// with an exact running sum (integer nanoseconds, so the mean never drifts).
type window struct {
	buf  []time.Duration
	next int
	n    int
	sum  time.Duration
}

// push adds v, evicting the oldest value when the window is full.
func (w *window) push(v time.Duration) {
	if w.n == len(w.buf) {
		w.sum -= w.buf[w.next]
	} else {
		w.n++
	}
	w.buf[w.next] = v
	w.sum += v
	if w.next++; w.next == len(w.buf) {
		w.next = 0
	}
}

// full reports whether the window holds len(buf) values.
func (w *window) full() bool { return w.n == len(w.buf) }

// mean returns the mean of the values held, and false when there are none.
func (w *window) mean() (time.Duration, bool) {
	if w.n == 0 {
		return 0, false
	}
	return w.sum / time.Duration(w.n), true
}
