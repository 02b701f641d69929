package elastic

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/view"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// ObserverPrefix starts the memberlist name of every Observer. Workers
// never count such a node as a member (it is in nobody's view), and a
// worker's ID may not start with it.
const ObserverPrefix = "~"

// isObserver reports whether the node name belongs to an Observer.
func isObserver(name string) bool { return strings.HasPrefix(name, ObserverPrefix) }

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// JobID and Secret are the job's (the memberlist key and label derive
	// from them, as the workers' do).
	JobID  string
	Secret []byte
	// BindAddr and BindPort are where memberlist listens (port 0: any);
	// AdvertiseAddr, if set, is the IP the workers reach it on, else
	// BindAddr, which must then not be unspecified.
	BindAddr      string
	BindPort      int
	AdvertiseAddr string
	// Timers tune failure detection; use the workers' (DefaultTimers).
	Timers Timers
	// Logger receives memberlist's warnings.
	Logger zerolog.Logger
}

// ObserverEvent is what an Observer saw: a newer view, or a node that
// joined or left (died). Exactly one of its fields is set.
type ObserverEvent struct {
	// View is a generation newer than any seen before (proposed: it may
	// never form if a member dies meanwhile; a later one then follows).
	View *view.View
	// Joined names a worker node that joined the membership.
	Joined string
	// Left names a worker node the failure detector declared dead, or
	// that left.
	Left string
}

// Observer watches an elastic job's membership without being a member: a
// launcher runs one so that (1) every worker it starts has a seed that
// exists before any worker does (the observer's address), and a worker
// joining a running job learns the job's current view from it at join;
// (2) it sees each generation as it is proposed and each node the failure
// detector declares dead (to hand the dead node's data shards back, say).
// The workers' deciders ignore it (ObserverPrefix).
//
// One goroutine (the loop) owns the newest view; memberlist's callbacks
// only queue events for it.
type Observer struct {
	ml     *memberlist.Memberlist
	name   string
	addr   string
	box    *mailbox
	state  *published
	events chan ObserverEvent
	quit   chan struct{}
	done   chan struct{}
	log    zerolog.Logger
}

// Observe joins the job's memberlist as an observer (it contacts nobody:
// workers join it) and starts delivering events.
func Observe(cfg ObserverConfig) (*Observer, error) {
	c := Config{
		ID: "observer", JobID: cfg.JobID, Secret: cfg.Secret, BindAddr: cfg.BindAddr, BindPort: cfg.BindPort,
		AdvertiseAddr: cfg.AdvertiseAddr, Timers: cfg.Timers,
	}
	var errs []error
	if c.JobID == "" || len(c.JobID) > 128 {
		errs = append(errs, errors.New("job id must be 1..128 bytes"))
	}
	if err := settings.CheckSecret(c.Secret); err != nil {
		errs = append(errs, err)
	}
	if err := checkBind(&c); err != nil {
		errs = append(errs, err)
	}
	if err := c.Timers.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("elastic: invalid observer config: %w", err)
	}
	key, err := MemberlistKey(cfg.Secret, cfg.JobID)
	if err != nil {
		return nil, err
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	name := ObserverPrefix + "observer." + hex.EncodeToString(suffix[:])
	o := &Observer{
		name: name, box: newMailbox(), state: &published{}, events: make(chan ObserverEvent),
		quit: make(chan struct{}), done: make(chan struct{}), log: cfg.Logger.With().Str("node", name).Logger(),
	}
	dg := newDelegate(name, o.box, o.state)
	ml, err := memberlist.Create(memberlistConfig(&c, name, key, dg, o.log))
	if err != nil {
		return nil, fmt.Errorf("elastic: starting the observer's memberlist on %s:%d: %w", c.BindAddr, c.BindPort, err)
	}
	o.ml = ml
	if o.addr = dg.localAddr(); o.addr == "" {
		_ = ml.Shutdown()
		return nil, fmt.Errorf("elastic: memberlist on %s:%d did not announce the observer", c.BindAddr, c.BindPort)
	}
	go o.loop()
	return o, nil
}

// Addr is the observer's memberlist host:port: the seed to give workers
// (RINGTAIL_ELASTIC_SEEDS).
func (o *Observer) Addr() string { return o.addr }

// Events delivers what the observer sees, in order; it is closed by
// Close. Read it promptly: memberlist never waits for it (events queue
// without bound), but the loop does.
func (o *Observer) Events() <-chan ObserverEvent { return o.events }

// Close leaves the membership and stops the loop; Events is closed.
func (o *Observer) Close() error {
	select {
	case <-o.quit:
	default:
		close(o.quit)
	}
	<-o.done
	_ = o.ml.Leave(DefaultTimers().TCPTimeout)
	return o.ml.Shutdown()
}

// loop turns memberlist's events into ObserverEvents and publishes the
// newest view (workers joining through this node learn it at join).
func (o *Observer) loop() {
	defer close(o.done)
	defer close(o.events)
	var newest uint64
	live := map[string]bool{}
	emit := func(e ObserverEvent) bool {
		select {
		case o.events <- e:
			return true
		case <-o.quit:
			return false
		}
	}
	for {
		select {
		case <-o.quit:
			return
		case <-o.box.signal:
		}
		for _, e := range o.box.take() {
			var out *ObserverEvent
			switch {
			case e.kind == evAlive && !isObserver(e.name) && !live[e.name]:
				live[e.name] = true
				out = &ObserverEvent{Joined: e.name}
			case e.kind == evDead && live[e.name]:
				delete(live, e.name)
				out = &ObserverEvent{Left: e.name}
			case e.kind == evMsg || e.kind == evState:
				m, err := decode(e.data)
				if err != nil {
					o.log.Warn().Err(err).Msg("elastic: observer: bad message")
					continue
				}
				if v, ok := m.(view.View); ok && v.Gen > newest {
					newest = v.Gen
					o.state.set(v)
					out = &ObserverEvent{View: &v}
				}
			}
			if out != nil && !emit(*out) {
				return
			}
		}
	}
}
