package flight

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// DefaultSize is the number of calls a recorder keeps by default.
const DefaultSize = 2000

// MaxSize bounds Config.Size (a slot is about 140 bytes).
const MaxSize = 1 << 20

// State is where a recorded call stands.
type State uint8

// The states of a call.
const (
	Queued  State = iota + 1 // waiting for the call before it (another goroutine's) to end
	Running                  // under way
	Done                     // returned successfully
	Failed                   // returned an error
)

// String names the state as dumps spell it.
func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case Running:
		return "running"
	case Done:
		return "done"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Config configures a Recorder.
type Config struct {
	// Rank and World place the rank; JobID and Generation name the job
	// in dumps and their file names.
	Rank, World int
	JobID       string
	Generation  uint64
	// Size is the number of calls kept (0: DefaultSize).
	Size int
	// Dir is where dumps are written, created if need be ("": a failure
	// is not dumped, and SIGUSR1 dumps into the system's temporary
	// directory).
	Dir string
	// Names renders element types and operators.
	Names wire.Names
	// Logger says where dumps went.
	Logger zerolog.Logger
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	var errs []error
	if c.World < 1 || c.Rank < 0 || c.Rank >= c.World {
		errs = append(errs, fmt.Errorf("rank %d of world %d", c.Rank, c.World))
	}
	if c.Size < 0 || c.Size > MaxSize {
		errs = append(errs, fmt.Errorf("size %d outside 0..%d", c.Size, MaxSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flight: invalid config: %w", err)
	}
	return nil
}

// slot is one recorded call, one cache line: a call's path writes a
// line it has not touched for Size calls, so it writes one. Times are
// nanoseconds since the recorder's base on the monotonic clock. What only
// slow calls have (a long wait, an error, a call site) is in the slot's
// extra, a parallel array the fast path never touches.
type slot struct {
	desc      wire.Desc // 32 bytes
	start     int64
	end       int64 // 0: not ended
	algorithm uint8 // index into Recorder.names
	purpose   uint8 // index into Recorder.names
	state     State
	exact     bool // start was read for this call (else: the last reading before it)
	extra     bool // the slot's extra holds something
	_         [11]byte
}

// extra is what a slot records of a slow call.
type extra struct {
	waitPeer  int32 // -1: none
	blamed    int32 // -1: none
	waitSince int64
	site      string
	err       string
}

// CallLock is the engine's lock that every call holds while it writes its
// slot (a *sync.Mutex).
type CallLock interface {
	TryLock() bool
	Unlock()
}

// Recorder is one rank's flight recorder. Begin, Site, Waiting and End are
// called by the engine under its call lock, one call at a time; Queue and
// the readers from any goroutine.
type Recorder struct {
	cfg      Config
	host     string
	base     time.Time // monotonic origin of the slots' times
	ring     []slot
	extras   []extra
	names    []string // algorithm and purpose names (index 0: "")
	pos      int      // slot of the current (last begun) call
	seq      uint64   // calls begun
	cur      *slot    // the slot of the call between Begin and End (at pos), or nil
	now      int64    // the last clock reading
	lastRead int64    // when the clock was last read by Begin
	tick     uint64   // calls since the recorder started (clock pacing)
	lastName uint8    // the index name found last
	mask     uint64   // Begin reads the clock when tick&mask == 0
	lock     CallLock

	// pub guards what a running call shares with readers: live says the
	// current call has published itself (it waited long) and writes its
	// slot only under pub; queued lists calls waiting for the call lock.
	pub    sync.Mutex
	live   bool
	queued []*Ticket
	// A failure is dumped once by the call that failed and once by the
	// goroutine (unless the call did first); warned: the lack of a
	// directory was logged.
	dumpedByCall, dumpedByWatch, warned bool
	started                             bool            // Watch started the goroutine (which closes done)
	failureFn                           func() *Failure // the communicator's failure (from Watch)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Ticket is a call recorded as queued (see Queue).
type Ticket struct {
	desc  wire.Desc
	since int64
}

// clockSpacing: while calls come at least this far apart, every Begin
// reads the clock (70 ns at most on a VM: under 0.2% of the spacing);
// closer together, the clock is read every 2^k calls.
const (
	clockSpacing = 40 * time.Microsecond
	maxMask      = 1<<10 - 1
)

// longWait is how long a call waits before it publishes itself to readers
// (and its times are read exactly).
const longWait = time.Millisecond

// New validates cfg and returns a recorder with every slot allocated.
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Dir != "" {
		if err := fsperm.MkdirAll(cfg.Dir); err != nil {
			return nil, fmt.Errorf("flight: dump directory: %w", err)
		}
	}
	host, _ := os.Hostname()
	return &Recorder{cfg: cfg, host: host, base: time.Now(), ring: make([]slot, cfg.Size), extras: make([]extra, cfg.Size),
		names: []string{""}, pos: -1, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// SetCallLock gives the recorder the engine's call lock, which readers
// take while no call runs.
func (r *Recorder) SetCallLock(l CallLock) { r.lock = l }

// since converts a time to the recorder's clock.
func (r *Recorder) since(t time.Time) int64 { return int64(t.Sub(r.base)) }

// Begin records the start of a call with descriptor d, run by the program
// algorithm; purpose says why the communicator made it when the
// application did not ("" for the application's calls).
func (r *Recorder) Begin(d *wire.Desc, algorithm, purpose string) {
	r.seq++
	r.pos++
	if r.pos == len(r.ring) {
		r.pos = 0
	}
	s := &r.ring[r.pos]
	// Field by field: the caller has just built d with narrow stores,
	// and a copy's wide loads of them would stall on store forwarding.
	sd := &s.desc
	sd.Collective, sd.DType, sd.RedOp, sd.Root, sd.Group, sd.Tag, sd.Call, sd.Count =
		d.Collective, d.DType, d.RedOp, d.Root, d.Group, d.Tag, d.Call, d.Count
	s.start, s.end, s.exact, s.state, s.extra = r.now, 0, false, Running, false
	s.algorithm = r.name(algorithm)
	s.purpose = 0
	if purpose != "" {
		s.purpose = r.name(purpose)
	}
	r.cur = s
	r.tick++
	if (r.tick-1)&r.mask == 0 {
		r.stamp(s) // last: the registers need not survive the call
	}
}

// stamp reads the clock for s (Begin's call).
func (r *Recorder) stamp(s *slot) {
	r.readClock()
	s.start, s.exact = r.now, true
}

// name returns the index of a name (an algorithm's or a purpose's):
// programs are cached, so the name is most often the previous call's, a
// comparison of pointers.
func (r *Recorder) name(n string) uint8 {
	if last := r.names[r.lastName]; unsafe.StringData(n) == unsafe.StringData(last) && len(n) == len(last) {
		return r.lastName
	}
	return r.lookupName(n)
}

// lookupName is name's search of the names seen before.
func (r *Recorder) lookupName(n string) uint8 {
	for i, m := range r.names {
		if m == n {
			r.lastName = uint8(i)
			return r.lastName
		}
	}
	if len(r.names) == 255 {
		return 0
	}
	r.names = append(r.names, n)
	r.lastName = uint8(len(r.names) - 1)
	return r.lastName
}

// extraOf returns the current slot's extra, cleared on first use.
func (r *Recorder) extraOf(s *slot) *extra {
	x := &r.extras[r.pos]
	if !s.extra {
		*x = extra{waitPeer: -1, blamed: -1}
		s.extra = true
	}
	return x
}

// readClock reads the clock for Begin and paces the next reading: while
// calls come closer together than clockSpacing, half as often; while
// they come further apart, twice as often.
func (r *Recorder) readClock() {
	now := int64(time.Since(r.base))
	if r.lastRead > 0 {
		per := (now - r.lastRead) / int64(r.mask+1)
		switch {
		case per < int64(clockSpacing):
			r.mask = min(r.mask<<1|1, maxMask)
		case per > 4*int64(clockSpacing):
			r.mask >>= 1
		}
	}
	r.lastRead, r.now = now, now
}

// Site records the current call's call site (RINGTAIL_DEBUG=detail).
func (r *Recorder) Site(site string) {
	if r.cur == nil {
		return
	}
	if r.live {
		r.pub.Lock()
		defer r.pub.Unlock()
	}
	r.extraOf(&r.ring[r.pos]).site = site
}

// Waiting records that the current call has waited on peer since since
// (the executor reports a wait once it has lasted a while): the call
// publishes itself to readers once the wait is long.
func (r *Recorder) Waiting(peer int, since, now time.Time) {
	s := r.cur
	if s == nil {
		return
	}
	if r.live {
		r.pub.Lock()
		x := r.extraOf(s)
		x.waitPeer, x.waitSince = int32(peer), r.since(since)
		r.pub.Unlock()
		return
	}
	if now.Sub(since) < longWait {
		return
	}
	r.pub.Lock()
	x := r.extraOf(s)
	x.waitPeer, x.waitSince = int32(peer), r.since(since)
	if !s.exact {
		s.start, s.exact = min(s.start, x.waitSince), true
	}
	r.live = true
	r.pub.Unlock()
}

// End records the end of the current call: done, or failed with err.
// (Small enough to be inlined: the call that neither failed nor waited
// long only stores its state.)
func (r *Recorder) End(err error) {
	if s := r.cur; s != nil && err == nil && !r.live {
		s.state, s.end, r.cur = Done, r.now, nil
		return
	}
	r.endSlow(err)
}

// endSlow is End of a call that failed, or waited long (or of none).
func (r *Recorder) endSlow(err error) {
	s := r.cur
	if s == nil {
		return
	}
	r.cur = nil
	now := int64(time.Since(r.base))
	r.now = now
	if r.live {
		r.pub.Lock()
		defer r.pub.Unlock()
		r.live = false
	}
	s.end = now
	if err == nil {
		s.state = Done
		return
	}
	s.state = Failed
	x := r.extraOf(s)
	x.err = err.Error()
	var te *transport.Error
	if errors.As(err, &te) && te.Rank != transport.NoRank {
		x.blamed = int32(te.Rank)
	}
}

// Queue records a call that waits for the call lock (another goroutine's
// call runs); the caller passes the ticket to Dequeue once it holds the
// lock. Only contended calls pay for it.
func (r *Recorder) Queue(d *wire.Desc) *Ticket {
	t := &Ticket{desc: *d, since: int64(time.Since(r.base))}
	r.pub.Lock()
	if len(r.queued) < 64 {
		r.queued = append(r.queued, t)
	}
	r.pub.Unlock()
	return t
}

// Dequeue removes a queued call's ticket.
func (r *Recorder) Dequeue(t *Ticket) {
	r.pub.Lock()
	for i, q := range r.queued {
		if q == t {
			r.queued = append(r.queued[:i], r.queued[i+1:]...)
			break
		}
	}
	r.pub.Unlock()
}
