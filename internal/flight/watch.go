package flight

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
)

// Reader waits: a dump waits this long for a running call that has not
// published itself (see Snapshot) before it settles for a partial dump.
const (
	failureWait = 5 * time.Second
	signalWait  = time.Second
	liveWait    = time.Second
)

// Watch starts the recorder's goroutine: it dumps when failed is closed
// (the communicator failed; failure then says why, and ignore says whether
// the failure is the rank's own Close), and on SIGUSR1 (every recorder of
// the process dumps its rank). failed may be nil (a one-rank job). Close
// stops it.
func (r *Recorder) Watch(failed <-chan struct{}, failure func() *Failure, ignore func() bool) {
	sig, stopSig := notifyDump()
	r.pub.Lock()
	r.started, r.failureFn = true, failure
	r.pub.Unlock()
	go func() {
		defer close(r.done)
		defer stopSig()
		for {
			select {
			case <-failed:
				failed = nil
				if !ignore() {
					r.DumpFailure(failure(), false)
				}
			case <-sig:
				r.dumpSignal(failure())
			case <-r.stop:
				// A failure that came with the stop is still dumped.
				select {
				case <-failed:
					if !ignore() {
						r.DumpFailure(failure(), false)
					}
				default:
				}
				return
			}
		}
	}()
}

// Close stops the goroutine Watch started (if any). Safe to call twice.
func (r *Recorder) Close() {
	r.once.Do(func() {
		close(r.stop)
		if r.watching() {
			<-r.done
		}
	})
}

// watching reports whether Watch started the goroutine: done is then
// closed only by it.
func (r *Recorder) watching() bool {
	r.pub.Lock()
	defer r.pub.Unlock()
	return r.started
}

// DumpFailure writes the dump of a failed communicator, unless no
// directory is set, and returns the path written ("" when none). locked
// says the caller holds the call lock: it is the call that failed, and it
// dumps (once) before it returns, so that a process that exits on the
// error leaves its dump. The recorder's goroutine dumps (once) a rank that
// was between calls, unless the failed call already has.
func (r *Recorder) DumpFailure(f *Failure, locked bool) string {
	r.pub.Lock()
	skip := r.dumpedByCall || !locked && r.dumpedByWatch
	if locked {
		r.dumpedByCall = true
	} else {
		r.dumpedByWatch = true
	}
	first := !r.warned
	r.warned = true
	r.pub.Unlock()
	if skip {
		return ""
	}
	if r.cfg.Dir == "" {
		if first {
			r.cfg.Logger.Warn().Int("rank", r.cfg.Rank).Msg("flight recorder: not dumped: set RINGTAIL_FLIGHT_DIR (or RINGTAIL_TIMELINE) to keep each rank's last calls when a job fails")
		}
		return ""
	}
	var d *Dump
	if locked {
		d = r.SnapshotLocked("failure", f)
	} else {
		d = r.Snapshot("failure", f, failureWait, 0)
	}
	return r.write(r.cfg.Dir, d)
}

// dumpSignal writes a dump on SIGUSR1, into the dump directory or the
// system's temporary directory.
func (r *Recorder) dumpSignal(f *Failure) {
	dir := r.cfg.Dir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ringtail-flight")
		if err := fsperm.MkdirAll(dir); err != nil {
			r.cfg.Logger.Error().Err(err).Msg("flight recorder: cannot dump on SIGUSR1")
			return
		}
	}
	r.write(dir, r.Snapshot("signal", f, signalWait, 0))
}

func (r *Recorder) write(dir string, d *Dump) string {
	path, err := Write(dir, d)
	if err != nil {
		r.cfg.Logger.Error().Err(err).Int("rank", r.cfg.Rank).Msg("flight recorder: dump failed")
		return ""
	}
	r.cfg.Logger.Warn().Int("rank", r.cfg.Rank).Str("dump", path).Str("reason", d.Reason).
		Msgf("flight recorder: rank %d's last %d calls dumped; ringtail debug analyze %s", r.cfg.Rank, len(d.Entries), dir)
	return path
}

// WriteLive writes a live dump as JSON (/debug/flight), with the last
// last calls only when last is positive.
func (r *Recorder) WriteLive(w io.Writer, last int) error {
	r.pub.Lock()
	failure := r.failureFn
	r.pub.Unlock()
	var f *Failure
	if failure != nil {
		f = failure()
	}
	d := r.Snapshot("live", f, liveWait, last)
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(d)
}
