package shard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func ranges(ss []Shard) [][2]int64 {
	out := make([][2]int64, len(ss))
	for i, s := range ss {
		out[i] = [2]int64{s.Offset, s.Offset + s.Length}
	}
	return out
}

func mustQueue(t *testing.T, cfg Config) *Queue {
	t.Helper()
	q, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The brief's test vector (AntDT §V-C, unshuffled): 1000 samples in shards
// of 100. After two pulls DOING is [0,100) and [100,200) and TODO is
// [200,300) … [900,1000); a failure report puts the shard back, at the end.
func TestAntDTSecVC_TwoPullsThenFailure(t *testing.T) {
	q := mustQueue(t, Config{Samples: 1000, ShardSize: 100, Epochs: 1})
	if k := q.Stats().ShardsPerEpoch; k != 10 {
		t.Fatalf("K = %d, want 10", k)
	}
	a, err := q.Pull("w1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Pull("w2")
	if err != nil {
		t.Fatal(err)
	}
	var doing []Shard
	for _, as := range q.Doing() {
		doing = append(doing, as.Shard)
	}
	if got, want := ranges(doing), [][2]int64{{0, 100}, {100, 200}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("DOING = %v, want %v", got, want)
	}
	var want [][2]int64
	for off := int64(200); off < 1000; off += 100 {
		want = append(want, [2]int64{off, off + 100})
	}
	if got := ranges(q.Todo()); !reflect.DeepEqual(got, want) {
		t.Fatalf("TODO = %v, want %v", got, want)
	}
	if q.Doing()[0].Worker != "w1" || q.Doing()[1].Worker != "w2" {
		t.Fatalf("holders %v", q.Doing())
	}

	if err := q.Fail("w2", a.ID); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("w2 failing w1's shard: err = %v, want ErrNotOwner", err)
	}
	if err := q.Fail("w1", a.ID); err != nil {
		t.Fatal(err)
	}
	todo := ranges(q.Todo())
	if last := todo[len(todo)-1]; last != [2]int64{0, 100} || len(todo) != 9 {
		t.Fatalf("after failure TODO = %v, want [200,300)…[900,1000) then [0,100)", todo)
	}
	if got := q.Doing(); len(got) != 1 || got[0].Shard.ID != b.ID {
		t.Fatalf("after failure DOING = %v, want only %s", got, b)
	}
}

// K = ⌈N/(B·M)⌉ with a short last shard.
func TestConfig_ShardCountFromBatchesPerShard(t *testing.T) {
	cfg := Config{Samples: 1000, BatchSize: 32, BatchesPerShard: 3, Epochs: 1}
	if cfg.ShardLen() != 96 || cfg.NumShards() != 11 {
		t.Fatalf("shard len %d, K %d; want 96 and ⌈1000/96⌉ = 11", cfg.ShardLen(), cfg.NumShards())
	}
	q := mustQueue(t, cfg)
	todo := q.Todo()
	if last := todo[10]; last.Offset != 960 || last.Length != 40 {
		t.Fatalf("last shard %s, want [960,1000)", last)
	}
	for _, bad := range []Config{
		{Samples: 0, ShardSize: 1, Epochs: 1},
		{Samples: 10, Epochs: 1},
		{Samples: 10, ShardSize: 1, Epochs: 0},
		{Samples: 10, ShardSize: -1, Epochs: 1},
	} {
		if _, err := NewQueue(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// At-least-once bookkeeping around deaths, step by step.
func TestQueue_DeadWorkerShardsReturnAndLateReportsCountAsDuplicates(t *testing.T) {
	q := mustQueue(t, Config{Samples: 300, ShardSize: 100, Epochs: 1})
	s0, _ := q.Pull("a")
	if again, _ := q.Pull("a"); again != s0 || q.Stats().Pulls != 1 {
		t.Fatalf("a pulled again and got %s (pulls %d); a worker holding %s must get it back", again, q.Stats().Pulls, s0)
	}
	s1, _ := q.Pull("x")
	s2, _ := q.Pull("b")
	if got := q.WorkerDied("a"); !slices.Equal(got, []int64{s0.ID}) {
		t.Fatalf("requeued %v, want [%d]", got, s0.ID)
	}
	if got := q.WorkerDied("a"); got != nil {
		t.Fatalf("second death requeued %v", got)
	}
	q.WorkerDied("x")
	// "a" was only slow: its late DONE for s0 (TODO now) is accepted.
	if dup, err := q.Done("a", s0.ID); err != nil || !dup {
		t.Fatalf("late done: dup=%v err=%v, want duplicate", dup, err)
	}
	// s1 goes to c; x's late report finishes it, c's report is the second.
	s1b, _ := q.Pull("c")
	if s1b.ID != s1.ID {
		t.Fatalf("c pulled %s, want %s", s1b, s1)
	}
	if dup, _ := q.Done("x", s1.ID); !dup {
		t.Fatal("report from the replaced holder must be a duplicate")
	}
	if dup, _ := q.Done("c", s1.ID); !dup {
		t.Fatal("second completion must be a duplicate")
	}
	if dup, err := q.Done("b", s2.ID); err != nil || dup {
		t.Fatalf("normal done: dup=%v err=%v", dup, err)
	}
	st := q.Stats()
	if !st.Finished || st.DoneTotal != 3 || st.Duplicates != 3 || st.Requeued != 2 {
		t.Fatalf("stats %+v, want finished, 3 done, 3 duplicates, 2 requeued", st)
	}
	if _, err := q.Pull("a"); !errors.Is(err, ErrFinished) {
		t.Fatalf("pull after the end: %v", err)
	}
	if _, err := q.Done("a", 99); !errors.Is(err, ErrUnknownShard) {
		t.Fatalf("done for unknown shard: %v", err)
	}
}

func TestQueue_NoShardWhileOthersHoldTheRest(t *testing.T) {
	q := mustQueue(t, Config{Samples: 100, ShardSize: 100, Epochs: 2})
	s, _ := q.Pull("a")
	if _, err := q.Pull("b"); !errors.Is(err, ErrNoShard) {
		t.Fatalf("err = %v, want ErrNoShard", err)
	}
	if _, err := q.Done("a", s.ID+1); !errors.Is(err, ErrUnknownShard) {
		t.Fatalf("done for next epoch's shard: %v", err)
	}
	q.Done("a", s.ID)
	next, err := q.Pull("b")
	if err != nil || next.Epoch != 1 || next.ID != 1 {
		t.Fatalf("after epoch 0: %s, %v; want epoch 1 shard id 1", next, err)
	}
	if dup, _ := q.Done("a", s.ID); !dup {
		t.Fatal("done for a finished epoch must be a duplicate")
	}
	if _, err := q.Apply(Command{Op: "steal", Worker: "a"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := q.Pull(""); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("empty worker: %v", err)
	}
}

// Property: random pulls, dones, failures, deaths and late reports over
// several epochs; at the end every epoch has exactly K shards DONE and
// every sample index was trained at least once per epoch.
func TestQueue_RandomScheduleCoversEverySampleEachEpoch(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 99))
		cfg := Config{Samples: 1 + rng.Int64N(900), ShardSize: 1 + rng.Int64N(80), Epochs: 1 + rng.IntN(3), Shuffle: seed%2 == 0, Seed: seed}
		q := mustQueue(t, cfg)
		k := cfg.NumShards()
		covered := make([][]int, cfg.Epochs)
		for e := range covered {
			covered[e] = make([]int, cfg.Samples)
		}
		held := map[string][]Shard{} // what each worker believes it holds
		workers := []string{"w0", "w1", "w2", "w3", "w4"}
		train := func(s Shard) {
			for _, i := range s.Indices() {
				covered[s.Epoch][i]++
			}
		}
		for step := 0; !q.Stats().Finished; step++ {
			if step > 100000 {
				t.Fatalf("seed %d: no progress after %d steps: %+v", seed, step, q.Stats())
			}
			w := workers[rng.IntN(len(workers))]
			switch op := rng.IntN(10); {
			case op < 4:
				if s, err := q.Pull(w); err == nil {
					if !slices.Contains(held[w], s) {
						held[w] = append(held[w], s)
					}
				} else if !errors.Is(err, ErrNoShard) {
					t.Fatalf("seed %d: pull: %v", seed, err)
				}
			case op < 8 && len(held[w]) > 0:
				n := rng.IntN(len(held[w]))
				s := held[w][n]
				held[w] = slices.Delete(held[w], n, n+1)
				train(s) // gradients applied before the report
				if _, err := q.Done(w, s.ID); err != nil {
					t.Fatalf("seed %d: done %s: %v", seed, s, err)
				}
			case op == 8 && len(held[w]) > 0:
				s := held[w][0]
				if err := q.Fail(w, s.ID); err == nil {
					held[w] = held[w][1:]
				} else if !errors.Is(err, ErrNotOwner) {
					t.Fatalf("seed %d: fail: %v", seed, err)
				}
			case op == 9:
				// Declared dead; half the time it was only slow and keeps
				// its shards (reporting later), otherwise it forgets them.
				q.WorkerDied(w)
				if rng.IntN(2) == 0 {
					held[w] = nil
				}
			}
			st := q.Stats()
			if st.Todo+st.Doing+st.Done != k && !st.Finished {
				t.Fatalf("seed %d: %d+%d+%d shards, want %d", seed, st.Todo, st.Doing, st.Done, k)
			}
		}
		st := q.Stats()
		if st.DoneTotal != k*int64(cfg.Epochs) {
			t.Fatalf("seed %d: DONE total %d, want K·E = %d", seed, st.DoneTotal, k*int64(cfg.Epochs))
		}
		for e := range covered {
			for i, c := range covered[e] {
				if c == 0 {
					t.Fatalf("seed %d: epoch %d sample %d never trained", seed, e, i)
				}
			}
		}
	}
}

// Snapshot/Restore: the restored queue answers every later command
// exactly like the original.
func TestSnapshot_RestoredQueueBehavesIdentically(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	cfg := Config{Samples: 777, ShardSize: 50, Epochs: 3, Shuffle: true, Seed: 9}
	q := mustQueue(t, cfg)
	randomCmd := func() Command {
		w := fmt.Sprintf("w%d", rng.IntN(4))
		switch rng.IntN(5) {
		case 0, 1:
			return Command{Op: OpPull, Worker: w}
		case 2, 3:
			return Command{Op: OpDone, Worker: w, Shard: rng.Int64N(cfg.NumShards() * 3)}
		default:
			return Command{Op: OpDied, Worker: w}
		}
	}
	for range 300 {
		q.Apply(randomCmd())
	}
	r, err := Restore(q.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for n := range 2000 {
		c := randomCmd()
		a, errA := q.Apply(c)
		b, errB := r.Apply(c)
		if !reflect.DeepEqual(a, b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("command %d %+v: original (%+v, %v), restored (%+v, %v)", n, c, a, errA, b, errB)
		}
	}
	if !reflect.DeepEqual(q.Snapshot(), r.Snapshot()) {
		t.Fatal("snapshots diverged")
	}
	bad := q.Snapshot()
	bad.Todo = append(bad.Todo, bad.Todo...)
	if len(bad.Todo) > 0 {
		if _, err := Restore(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("duplicate todo entries: err = %v", err)
		}
	}
}
