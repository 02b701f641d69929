package flight

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Version is the format of a Dump; Analyze reads this version only.
const Version = 1

// Dump is one rank's recorded calls as written to its file (JSON), served
// at /debug/flight and read by Analyze.
type Dump struct {
	Version    int    `json:"version"`
	Job        string `json:"job"`
	Generation uint64 `json:"generation"`
	Rank       int    `json:"rank"`
	World      int    `json:"world"`
	Host       string `json:"host"`
	PID        int    `json:"pid"`
	// Reason says why the dump was taken: "failure", "signal" (SIGUSR1)
	// or "live" (/debug/flight).
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
	// Failure is the communicator's failure, if it has failed.
	Failure *Failure `json:"failure,omitempty"`
	// Size is how many calls the recorder keeps; Recorded how many it has
	// recorded in all (the oldest Recorded − Size are gone).
	Size     int    `json:"size"`
	Recorded uint64 `json:"recorded"`
	// Partial is set when a call was running that the reader could not
	// wait for: the entries are those before it.
	Partial bool `json:"partial,omitempty"`
	// Queued are calls waiting for the running one (other goroutines').
	Queued []Entry `json:"queued,omitempty"`
	// Entries are the recorded calls, oldest first.
	Entries []Entry `json:"entries"`
}

// Failure is why a communicator failed, as every rank reports it.
type Failure struct {
	Kind     string `json:"kind"`
	Rank     int    `json:"rank"` // the rank blamed; -1: none
	Reporter int    `json:"reporter"`
	Detail   string `json:"detail,omitempty"`
	Error    string `json:"error"`
}

// Entry is one recorded call.
type Entry struct {
	Seq        uint64     `json:"seq"`   // this rank's count of calls, from 1
	Group      string     `json:"group"` // "world", or the group's id (a subgroup, a point-to-point pair)
	Call       uint64     `json:"call"`  // the call's number in its group, the same on every member
	Collective string     `json:"collective"`
	Count      uint64     `json:"count"`
	DType      string     `json:"dtype"`
	Op         string     `json:"op,omitempty"`
	Root       uint32     `json:"root,omitempty"`
	Step       uint32     `json:"step,omitempty"` // the step label (WithStep), or a point-to-point tag
	Algorithm  string     `json:"algorithm,omitempty"`
	Purpose    string     `json:"purpose,omitempty"` // why the communicator made the call itself
	Site       string     `json:"site,omitempty"`    // the call site (RINGTAIL_DEBUG=detail)
	State      string     `json:"state"`
	Start      time.Time  `json:"start"`
	End        *time.Time `json:"end,omitempty"`
	// Approx is set when Start and End are the last clock reading before
	// the call (calls came too fast to read the clock for each).
	Approx       bool       `json:"approx,omitempty"`
	WaitingOn    *int       `json:"waiting_on,omitempty"` // the peer a long wait was on
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	Blamed       *int       `json:"blamed,omitempty"` // the rank a failed call's error blamed
	Error        string     `json:"error,omitempty"`
}

// Describe renders the call as messages name it: "AllReduce #7
// (count=1024, float32, sum)".
func (e *Entry) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d", e.Collective, e.Call)
	if e.Group != "world" {
		fmt.Fprintf(&b, " of group %s", e.Group)
	}
	fmt.Fprintf(&b, " (count=%d, %s", e.Count, e.DType)
	if e.Op != "" {
		fmt.Fprintf(&b, ", %s", e.Op)
	}
	if e.Collective == wire.Broadcast.String() {
		fmt.Fprintf(&b, ", root=%d", e.Root)
	}
	b.WriteString(")")
	return b.String()
}

// shape is what every rank must agree on in a call (all but the state,
// the times and the algorithm).
func (e *Entry) shape() string {
	return fmt.Sprintf("%s|%s|%d|%s|%s|%d|%d|%s", e.Group, e.Collective, e.Count, e.DType, e.Op, e.Root, e.Step, e.Site)
}

// copied is a slot copied out of the ring under the lock, rendered after.
type copied struct {
	s   slot
	x   extra
	seq uint64
}

// entry renders a copied slot.
func (r *Recorder) entry(c *copied, names []string) Entry {
	s := &c.s
	d := &s.desc
	e := Entry{Seq: c.seq, Group: groupName(d.Group), Call: d.Call, Collective: d.Collective.String(), Count: d.Count,
		Algorithm: names[s.algorithm], Purpose: names[s.purpose], State: s.state.String(), Start: r.wall(s.start),
		Approx: !s.exact, Step: d.Tag}
	e.DType = fmt.Sprintf("dtype %d", d.DType)
	if r.cfg.Names.DType != nil {
		e.DType = r.cfg.Names.DType(d.DType)
	}
	if d.RedOp != 0 {
		e.Op = fmt.Sprintf("op %d", d.RedOp)
		if r.cfg.Names.RedOp != nil {
			e.Op = r.cfg.Names.RedOp(d.RedOp)
		}
	}
	if d.Collective != wire.AllReduce && d.Collective != wire.AllGather && d.Collective != wire.ReduceScatter && d.Collective != wire.Barrier {
		e.Root = d.Root
	}
	if s.end != 0 {
		t := r.wall(s.end)
		e.End = &t
	}
	if s.extra {
		x := &c.x
		e.Site, e.Error = x.site, x.err
		if x.waitPeer >= 0 {
			p, t := int(x.waitPeer), r.wall(x.waitSince)
			e.WaitingOn, e.WaitingSince = &p, &t
		}
		if x.blamed >= 0 {
			b := int(x.blamed)
			e.Blamed = &b
		}
	}
	return e
}

func groupName(g uint32) string {
	if g == wire.World {
		return "world"
	}
	return fmt.Sprintf("%#x", g)
}

// wall converts the recorder's clock to wall-clock time.
func (r *Recorder) wall(ns int64) time.Time { return r.base.Add(time.Duration(ns)).Round(0) }

// Snapshot reads the recorder into a dump (its last last calls when last
// is positive), waiting at most wait for a call that runs without having
// published itself (see the package comment); failure is the
// communicator's failure, if any. It never waits on a lock a call holds:
// it takes the engine's call lock only with TryLock (when no call runs),
// or the recorder's own mutex, which a call that waited long holds only
// for a few stores. Under either it only copies the slots, with two
// block copies, into a buffer allocated before (a call that starts
// meanwhile waits for that copy, not for an allocation or the rendering,
// which come after; BenchmarkLockedCopy).
func (r *Recorder) Snapshot(reason string, failure *Failure, wait time.Duration, last int) *Dump {
	deadline := time.Now().Add(wait)
	n := len(r.ring)
	if last > 0 {
		n = min(n, last)
	}
	buf := newSnapBuf(n)
	for {
		if r.lock == nil || r.lock.TryLock() {
			r.copySlots(&buf)
			if r.lock != nil {
				r.lock.Unlock()
			}
			return r.render(reason, failure, buf.copies(), buf.names, buf.seq)
		}
		r.pub.Lock()
		if r.live {
			r.copySlots(&buf)
			r.pub.Unlock()
			return r.render(reason, failure, buf.copies(), buf.names, buf.seq)
		}
		r.pub.Unlock()
		if time.Now().After(deadline) {
			d := r.render(reason, failure, nil, nil, 0)
			d.Partial = true
			return d
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// SnapshotLocked is Snapshot for a caller that holds the call lock (a
// failed call dumping before it returns).
func (r *Recorder) SnapshotLocked(reason string, failure *Failure) *Dump {
	buf := newSnapBuf(len(r.ring))
	r.copySlots(&buf)
	return r.render(reason, failure, buf.copies(), buf.names, buf.seq)
}

// snapBuf is what a reader copies under a lock: the last slots in ring
// order, the extras of those that have one (same index), the names they
// index and the count of calls.
type snapBuf struct {
	slots  []slot
	extras []extra
	kept   int // slots[:kept] were copied, oldest first
	names  []string
	seq    uint64
}

func newSnapBuf(n int) snapBuf {
	return snapBuf{slots: make([]slot, n), extras: make([]extra, n)}
}

// copySlots copies the last len(b.slots) slots (fewer when fewer calls
// were recorded) into b; the caller holds the call lock or pub (with live
// set).
func (r *Recorder) copySlots(b *snapBuf) {
	n := len(r.ring)
	kept := min(int(min(r.seq, uint64(n))), len(b.slots))
	start := (r.pos - (kept - 1) + n) % n
	m := copy(b.slots[:kept], r.ring[start:])
	copy(b.slots[m:kept], r.ring)
	for i := range b.slots[:kept] {
		if b.slots[i].extra {
			b.extras[i] = r.extras[(start+i)%n]
		}
	}
	b.kept, b.names, b.seq = kept, r.names, r.seq
}

// copies pairs the copied slots with their extras and call numbers.
func (b *snapBuf) copies() []copied {
	out := make([]copied, b.kept)
	for i := range out {
		out[i] = copied{s: b.slots[i], seq: b.seq - uint64(b.kept-1-i)}
		if b.slots[i].extra {
			out[i].x = b.extras[i]
		}
	}
	return out
}

// render makes the dump of copied slots.
func (r *Recorder) render(reason string, failure *Failure, slots []copied, names []string, seq uint64) *Dump {
	d := &Dump{Version: Version, Job: r.cfg.JobID, Generation: r.cfg.Generation, Rank: r.cfg.Rank, World: r.cfg.World,
		Host: r.host, PID: os.Getpid(), Reason: reason, Time: time.Now().Round(0), Failure: failure, Size: len(r.ring),
		Recorded: seq, Entries: make([]Entry, 0, len(slots))}
	for i := range slots {
		d.Entries = append(d.Entries, r.entry(&slots[i], names))
	}
	r.pub.Lock()
	for _, q := range r.queued {
		d.Queued = append(d.Queued, Entry{Group: groupName(q.desc.Group), Collective: q.desc.Collective.String(),
			Count: q.desc.Count, State: Queued.String(), Start: r.wall(q.since)})
	}
	r.pub.Unlock()
	return d
}

// FileName is the name of a rank's dump in a dump directory.
func FileName(job string, generation uint64, rank int) string {
	clean := strings.Map(func(c rune) rune {
		if c == '/' || c == '\\' || c == 0 || c == ' ' {
			return '_'
		}
		return c
	}, job)
	return fmt.Sprintf("ringtail-flight.%s.g%d.rank%d.json", clean, generation, rank)
}

// Write writes d into dir as FileName (replacing an older dump of the same
// rank: written to a temporary file first, then renamed) and returns the
// path.
func Write(dir string, d *Dump) (string, error) {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return "", fmt.Errorf("flight: %w", err)
	}
	path := filepath.Join(dir, FileName(d.Job, d.Generation, d.Rank))
	tmp, err := os.CreateTemp(dir, ".ringtail-flight-*")
	if err != nil {
		return "", fmt.Errorf("flight: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("flight: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("flight: %w", err)
	}
	return path, nil
}

// ReadDir reads every dump in dir (files named as FileName makes them),
// sorted by job, generation and rank.
func ReadDir(dir string) ([]*Dump, error) {
	names, err := filepath.Glob(filepath.Join(dir, "ringtail-flight.*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("flight: no dumps (ringtail-flight.*.json) in %s", dir)
	}
	var out []*Dump
	var errs []error
	for _, name := range names {
		d, err := ReadFile(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		if a.Generation != b.Generation {
			return a.Generation < b.Generation
		}
		return a.Rank < b.Rank
	})
	return out, nil
}

// ReadFile reads one dump.
func ReadFile(path string) (*Dump, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse decodes a dump; name says where it came from in errors.
func Parse(b []byte, name string) (*Dump, error) {
	var d Dump
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("flight: %s: %w", name, err)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("flight: %s: dump version %d, want %d", name, d.Version, Version)
	}
	if d.World < 1 || d.Rank < 0 || d.Rank >= d.World {
		return nil, fmt.Errorf("flight: %s: rank %d of world %d", name, d.Rank, d.World)
	}
	return &d, nil
}

// RanksText renders ranks as "rank 3" or "ranks 0,1,2".
func RanksText(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(parts, ",")
}
