package flight

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

func newRec(t testing.TB, rank, world, size int) *Recorder {
	t.Helper()
	r, err := New(Config{Rank: rank, World: world, JobID: "job", Size: size})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	r.SetCallLock(&mu)
	return r
}

func allreduce(call, count uint64) *wire.Desc {
	return &wire.Desc{Collective: wire.AllReduce, DType: 1, RedOp: 1, Group: wire.World, Call: call, Count: count}
}

func TestTheRingKeepsTheLastCallsInOrder(t *testing.T) {
	r := newRec(t, 0, 2, 4)
	for c := uint64(1); c <= 10; c++ {
		r.Begin(allreduce(c, 8), "ring", "")
		r.End(nil)
	}
	d := r.Snapshot("live", nil, time.Second, 0)
	if d.Recorded != 10 || len(d.Entries) != 4 {
		t.Fatalf("recorded %d, kept %d entries; want 10 and 4", d.Recorded, len(d.Entries))
	}
	for i, e := range d.Entries {
		if e.Call != uint64(7+i) || e.Seq != uint64(7+i) || e.State != "done" || e.Algorithm != "ring" {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
}

func TestAFailedCallKeepsItsErrorAndBlame(t *testing.T) {
	r := newRec(t, 1, 3, 0)
	r.Begin(allreduce(1, 8), "ring", "")
	r.End(&transport.Error{Kind: transport.KindSilent, Rank: 2, Reporter: 1, Local: 1, Detail: "silent"})
	d := r.Snapshot("failure", nil, time.Second, 0)
	e := d.Entries[0]
	if e.State != "failed" || e.Blamed == nil || *e.Blamed != 2 || !strings.Contains(e.Error, "silent") || e.End == nil {
		t.Fatalf("failed entry: %+v", e)
	}
	r.Begin(allreduce(2, 8), "ring", "")
	r.End(errors.New("plain"))
	if e := r.Snapshot("failure", nil, time.Second, 0).Entries[1]; e.Blamed != nil || e.State != "failed" {
		t.Fatalf("an error that blames no rank: %+v", e)
	}
}

// The clock is read for every call while calls are far apart, and for a
// fraction of them in a burst.
func TestTheClockIsReadLessOftenInABurst(t *testing.T) {
	r := newRec(t, 0, 2, 0)
	for c := uint64(1); c <= 5000; c++ {
		r.Begin(allreduce(c, 2), "recursive-doubling", "")
		r.End(nil)
	}
	if r.mask == 0 {
		t.Fatal("5000 calls back to back: the clock is still read for every call")
	}
	approx := 0
	for _, e := range r.Snapshot("live", nil, time.Second, 0).Entries {
		if e.Approx {
			approx++
		}
	}
	if approx == 0 {
		t.Fatal("no entry is marked approximate")
	}
}

// A reader gets the running call's entry while the call waits, from
// another goroutine, without the call lock (the call holds it); and it
// gets a consistent ring while calls run (go test -race checks).
func TestAReaderSeesACallThatWaitsLong(t *testing.T) {
	r, err := New(Config{Rank: 0, World: 2, JobID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	r.SetCallLock(&mu)
	mu.Lock()
	r.Begin(allreduce(1, 8), "ring", "")
	since := time.Now().Add(-2 * longWait)
	r.Waiting(1, since, time.Now())
	got := make(chan *Dump)
	go func() { got <- r.Snapshot("live", nil, 10*time.Second, 0) }()
	d := <-got
	r.End(nil)
	mu.Unlock()
	if d.Partial || len(d.Entries) != 1 {
		t.Fatalf("dump while a call waits: %+v", d)
	}
	e := d.Entries[0]
	if e.State != "running" || e.WaitingOn == nil || *e.WaitingOn != 1 || e.WaitingSince == nil {
		t.Fatalf("running entry: %+v", e)
	}

	// Calls and readers at once.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if d := r.Snapshot("live", nil, time.Second, 0); len(d.Entries) == 0 {
				t.Error("empty snapshot")
				return
			}
		}
	}()
	for c := uint64(2); c < 3000; c++ {
		mu.Lock()
		r.Begin(allreduce(c, 8), "ring", "")
		if c%100 == 0 {
			r.Waiting(1, time.Now().Add(-2*longWait), time.Now())
		}
		r.End(nil)
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
}

// A reader that finds a call running that has not published itself waits
// for it, up to its bound, and then says the dump is partial.
func TestAReaderGivesUpOnACallThatNeverPublishes(t *testing.T) {
	r := newRec(t, 0, 2, 0)
	var mu sync.Mutex
	r.SetCallLock(&mu)
	mu.Lock()
	defer mu.Unlock()
	r.Begin(allreduce(1, 8), "ring", "")
	q := r.Queue(allreduce(0, 16))
	d := r.Snapshot("live", nil, 5*time.Millisecond, 0)
	if !d.Partial || len(d.Entries) != 0 || len(d.Queued) != 1 || d.Queued[0].State != "queued" {
		t.Fatalf("dump of an unpublished call: %+v", d)
	}
	r.Dequeue(q)
	if d := r.Snapshot("live", nil, 0, 0); len(d.Queued) != 0 {
		t.Fatalf("dequeued call still listed: %+v", d.Queued)
	}
}

func TestDumpsRoundTripThroughADirectory(t *testing.T) {
	dir := t.TempDir()
	for rank := range 2 {
		r := newRec(t, rank, 2, 0)
		r.Begin(allreduce(1, 8), "ring", "")
		r.End(nil)
		if _, err := Write(dir, r.Snapshot("failure", nil, time.Second, 0)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "unrelated.json"), []byte("{}"), 0o644)
	dumps, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(dumps) != 2 || dumps[0].Rank != 0 || dumps[1].Rank != 1 || dumps[1].Entries[0].Collective != "AllReduce" {
		t.Fatalf("read back %d dumps: %+v", len(dumps), dumps)
	}
	if _, err := ReadDir(t.TempDir()); err == nil {
		t.Fatal("an empty directory read without error")
	}
}

// job builds one dump per rank of world, each rank making calls 1..n[r]
// (call n[r] failing when fail[r] is set; a rank listed in missing makes
// no dump).
type job struct {
	world   int
	calls   []int    // completed calls per rank
	running []bool   // the next call was begun (and failed, with failure set)
	shape   []uint64 // the count of each rank's call number diffAt
	diffAt  uint64
	failure *Failure
	missing map[int]bool
}

func (j job) dumps(t *testing.T) []*Dump {
	var out []*Dump
	for rank := range j.world {
		if j.missing[rank] {
			continue
		}
		r := newRec(t, rank, j.world, 0)
		count := func(c uint64) uint64 {
			if c == j.diffAt && j.shape != nil {
				return j.shape[rank]
			}
			return 1024
		}
		for c := 1; c <= j.calls[rank]; c++ {
			r.Begin(allreduce(uint64(c), count(uint64(c))), "ring", "")
			r.End(nil)
		}
		if j.running != nil && j.running[rank] {
			c := uint64(j.calls[rank] + 1)
			r.Begin(allreduce(c, count(c)), "ring", "")
			r.Waiting((rank+1)%j.world, time.Now().Add(-3*time.Second), time.Now())
			r.End(&transport.Error{Kind: transport.KindTimeout, Rank: j.failure.Rank, Reporter: rank, Local: rank})
		}
		out = append(out, r.Snapshot("failure", j.failure, time.Second, 0))
	}
	return out
}

// checkStory analyzes j's dumps and checks that the story holds every
// line in wants and blames culprits (as fmt prints a []int).
func checkStory(t *testing.T, j job, culprits string, wants ...string) {
	t.Helper()
	rep := Analyze(j.dumps(t))
	text := strings.Join(rep.Lines, "\n")
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("the story lacks %q:\n%s", want, text)
		}
	}
	if got := fmt.Sprint(rep.Culprits); got != culprits {
		t.Errorf("culprits %s, want %s:\n%s", got, culprits, text)
	}
}

func TestAnalyzeNamesTheRankThatStoppedCalling(t *testing.T) {
	checkStory(t, job{world: 4, calls: []int{6, 6, 6, 6}, running: []bool{true, true, true, false},
		failure: &Failure{Kind: "timeout", Rank: 3, Reporter: 0}}, "[3]",
		"rank 3 completed AllReduce #6 (count=1024, dtype 1, op 1) and never called #7",
		"ranks 0,1,2 waited in AllReduce #7 (count=1024, dtype 1, op 1) for 3.0 s")
}

func TestAnalyzeFindsTheFirstCallWhereRanksDisagree(t *testing.T) {
	checkStory(t, job{world: 3, calls: []int{4, 4, 4}, running: []bool{true, true, true}, diffAt: 3, shape: []uint64{1024, 1023, 1024},
		failure: &Failure{Kind: "collective mismatch", Rank: 1, Reporter: 0}}, "[1]",
		"ranks disagree at call #3", "rank 1 called AllReduce #3 (count=1023", "ranks 0,2 called AllReduce #3 (count=1024")
	// Two ranks: no majority tells which call was meant; both are named.
	checkStory(t, job{world: 2, calls: []int{4, 4}, diffAt: 2, shape: []uint64{1024, 1023},
		failure: &Failure{Kind: "collective mismatch", Rank: 0, Reporter: 1}}, "[0 1]", "no majority")
}

func TestAnalyzeNamesARankThatLeftNoDump(t *testing.T) {
	checkStory(t, job{world: 3, calls: []int{5, 5, 5}, running: []bool{true, false, true}, missing: map[int]bool{1: true},
		failure: &Failure{Kind: "peer died", Rank: 1, Reporter: 0, Detail: "connection closed"}}, "[1]",
		"rank 1 left no dump", "ranks 0,2 failed in AllReduce #6", "blaming rank 1")
}

// The rank that caught a frame failing its integrity check fails and
// leaves; the others may report its leaving before its abort reaches them
// and outnumber it. The story is the integrity failure, naming the link.
func TestAnalyzeTellsAnIntegrityFailureOverTheDeathItCaused(t *testing.T) {
	dumps := job{world: 3, calls: []int{5, 5, 5}, running: []bool{true, true, true},
		failure: &Failure{Kind: "peer died", Rank: 1, Reporter: 0, Detail: "connection closed"}}.dumps(t)
	const link = "frame 9 from rank 0 to rank 1 on channel 0 (a -> b) failed its integrity check (tag mismatch)"
	dumps[1].Failure = &Failure{Kind: "frame integrity", Rank: 0, Reporter: 1, Detail: link}
	text := strings.Join(Analyze(dumps).Lines, "\n")
	if !strings.Contains(text, "failure (ranks 0,1,2): frame integrity blaming rank 0, reported by rank 1: "+link) {
		t.Errorf("the story does not tell the integrity failure:\n%s", text)
	}
}

// BenchmarkBeginEnd is the recorder's cost per call on the path of a small
// call that does not wait: compare with an 8-byte allreduce (docs/debugging.md).
func BenchmarkBeginEnd(b *testing.B) {
	r := newRec(b, 0, 2, 0)
	d := allreduce(1, 2)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d.Call++
		r.Begin(d, "recursive-doubling", "")
		r.End(nil)
	}
}

// BenchmarkLockedCopy is how long a /debug/flight read holds the engine's
// call lock (when it got it with TryLock): the copy of a full default-size
// ring into a buffer allocated before. A call that starts meanwhile waits
// at most this long (docs/observability.md).
func BenchmarkLockedCopy(b *testing.B) {
	r := newRec(b, 0, 2, 0)
	d := allreduce(1, 2)
	for range DefaultSize {
		d.Call++
		r.Begin(d, "recursive-doubling", "")
		r.End(nil)
	}
	buf := newSnapBuf(DefaultSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r.copySlots(&buf); buf.kept != DefaultSize {
			b.Fatal(buf.kept)
		}
	}
}
