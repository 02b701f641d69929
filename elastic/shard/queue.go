package shard

import (
	"fmt"
	"slices"
)

// Queue is the shard state machine of one job: the TODO queue, the DOING
// holders and the DONE marks of the current epoch, plus counters. It is
// pure and not safe for concurrent use; one owner applies Commands.
//
// Semantics (AntDT §V-C 3): shards start TODO in the epoch's order (shuffled
// per epoch when Config.Shuffle); OpPull hands out the head; OpDone marks
// DONE; OpFail and OpDied put DOING shards at the end of the queue. When
// every shard of the epoch is DONE the next epoch starts with a fresh
// order; after the last epoch Pull returns ErrFinished. Processing is
// at-least-once: a late DONE from a worker that lost its shard is accepted
// (its gradients were applied) and counted in Stats.Duplicates, as is a
// second DONE of the same shard.
//
// A worker holds at most one shard, as in AntDT ("the worker cannot fetch
// new shards until it has completed its current one"): Pull by a worker
// that already holds a shard returns that shard again and changes
// nothing. This makes Pull idempotent, so a Pull whose answer was lost
// (the coordinator restarted) or a worker restarted under the same ID
// resumes its shard instead of stranding it in DOING. A process that
// trains several shards at once uses one worker ID per shard stream.
type Queue struct {
	cfg    Config
	k      int64
	epoch  int
	todo   []int64          // shard indices, queue order
	state  []State          // per shard index
	owner  []string         // per shard index, for Doing
	held   map[string]int64 // worker → index of the shard it holds
	ndone  int64            // Done shards in this epoch
	ndoing int64
	stats  counters
	fin    bool
}

// counters are the monotonic totals reported in Stats.
type counters struct {
	Pulls       int64 `json:"pulls"`
	Completions int64 `json:"completions"`
	Failures    int64 `json:"failures"`
	Requeued    int64 `json:"requeued"`
	Duplicates  int64 `json:"duplicates"`
	DoneTotal   int64 `json:"done_total"`
}

// NewQueue returns the queue at the start of epoch 0.
func NewQueue(cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{cfg: cfg, k: cfg.NumShards()}
	q.startEpoch(0)
	return q, nil
}

func (q *Queue) startEpoch(e int) {
	q.epoch = e
	q.todo = shardOrder(q.cfg, e)
	q.state = make([]State, q.k)
	q.owner = make([]string, q.k)
	q.held = map[string]int64{}
	q.ndone, q.ndoing = 0, 0
}

// Config returns the queue's configuration.
func (q *Queue) Config() Config { return q.cfg }

// shard builds the Shard value for index i of epoch e.
func (q *Queue) shard(e int, i int64) Shard {
	l := q.cfg.ShardLen()
	off := i * l
	return Shard{
		ID: int64(e)*q.k + i, Epoch: e, Index: i,
		Offset: off, Length: min(l, q.cfg.Samples-off),
		Shuffled: q.cfg.Shuffle, Seed: q.cfg.Seed,
	}
}

// ShardByID returns the shard an ID names, or ErrUnknownShard.
func (q *Queue) ShardByID(id int64) (Shard, error) {
	if id < 0 || id >= int64(q.cfg.Epochs)*q.k {
		return Shard{}, fmt.Errorf("%w: id %d outside 0..%d", ErrUnknownShard, id, int64(q.cfg.Epochs)*q.k-1)
	}
	return q.shard(int(id/q.k), id%q.k), nil
}

// Apply executes one command. A returned error means the state did not
// change (Result.Changed is false).
func (q *Queue) Apply(c Command) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	switch c.Op {
	case OpPull:
		return q.pull(c.Worker)
	case OpDone:
		return q.done(c.Worker, c.Shard)
	case OpFail:
		return q.fail(c.Worker, c.Shard)
	default:
		return q.died(c.Worker), nil
	}
}

func (q *Queue) pull(worker string) (Result, error) {
	if q.fin {
		return Result{}, ErrFinished
	}
	if i, ok := q.held[worker]; ok {
		return Result{Shard: q.shard(q.epoch, i)}, nil // resume, no change
	}
	if len(q.todo) == 0 {
		return Result{}, fmt.Errorf("%w: epoch %d has %d shards in progress", ErrNoShard, q.epoch, q.ndoing)
	}
	i := q.todo[0]
	q.todo = q.todo[1:]
	q.state[i], q.owner[i] = Doing, worker
	q.held[worker] = i
	q.ndoing++
	q.stats.Pulls++
	return Result{Shard: q.shard(q.epoch, i), Changed: true}, nil
}

func (q *Queue) done(worker string, id int64) (Result, error) {
	s, err := q.ShardByID(id)
	if err != nil {
		return Result{}, err
	}
	if s.Epoch > q.epoch {
		return Result{}, fmt.Errorf("%w: shard %d belongs to epoch %d, current is %d", ErrUnknownShard, id, s.Epoch, q.epoch)
	}
	res := Result{Shard: s, Changed: true}
	if s.Epoch < q.epoch || q.fin || q.state[s.Index] == Done {
		// Done twice: the epoch already counted it.
		q.stats.Duplicates++
		res.Duplicate = true
		return res, nil
	}
	i := s.Index
	switch {
	case q.state[i] == Doing && q.owner[i] == worker:
		q.ndoing--
		delete(q.held, worker)
	case q.state[i] == Doing:
		// Reassigned after this worker was declared dead; its gradients
		// are applied, so the shard is done, and the new holder's report
		// will count as the second completion.
		q.ndoing--
		delete(q.held, q.owner[i])
		q.stats.Duplicates++
		res.Duplicate = true
	default: // Todo: requeued after a death, not yet pulled again.
		q.todo = slices.DeleteFunc(q.todo, func(j int64) bool { return j == i })
		q.stats.Duplicates++
		res.Duplicate = true
	}
	q.state[i], q.owner[i] = Done, ""
	q.ndone++
	q.stats.Completions++
	q.stats.DoneTotal++
	if q.ndone == q.k {
		if q.epoch+1 < q.cfg.Epochs {
			q.startEpoch(q.epoch + 1)
		} else {
			q.fin = true
		}
	}
	return res, nil
}

func (q *Queue) fail(worker string, id int64) (Result, error) {
	s, err := q.ShardByID(id)
	if err != nil {
		return Result{}, err
	}
	if s.Epoch != q.epoch || q.fin || q.state[s.Index] != Doing || q.owner[s.Index] != worker {
		return Result{}, fmt.Errorf("%w: %s is not held by %q", ErrNotOwner, s, worker)
	}
	q.requeue(s.Index)
	q.stats.Failures++
	return Result{Shard: s, Changed: true}, nil
}

func (q *Queue) requeue(i int64) {
	delete(q.held, q.owner[i])
	q.state[i], q.owner[i] = Todo, ""
	q.todo = append(q.todo, i)
	q.ndoing--
	q.stats.Requeued++
}

func (q *Queue) died(worker string) Result {
	i, ok := q.held[worker]
	if !ok {
		return Result{}
	}
	q.requeue(i)
	return Result{Shard: q.shard(q.epoch, i), Requeued: []int64{q.shard(q.epoch, i).ID}, Changed: true}
}

// Assignment is a DOING shard and its holder.
type Assignment struct {
	// Shard is the shard in progress.
	Shard Shard `json:"shard"`
	// Worker holds it.
	Worker string `json:"worker"`
}

// Holders returns the distinct workers holding DOING shards, sorted.
func (q *Queue) Holders() []string {
	var out []string
	for i := range q.k {
		if q.state[i] == Doing {
			out = append(out, q.owner[i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Stats summarises the queue.
type Stats struct {
	// Epoch is the current 0-based epoch (the last one once finished).
	Epoch int `json:"epoch"`
	// Epochs is the configured number of epochs.
	Epochs int `json:"epochs"`
	// ShardsPerEpoch is K.
	ShardsPerEpoch int64 `json:"shards_per_epoch"`
	// Todo counts the current epoch's TODO shards.
	Todo int64 `json:"todo"`
	// Doing counts the current epoch's DOING shards.
	Doing int64 `json:"doing"`
	// Done counts the current epoch's DONE shards.
	Done int64 `json:"done"`
	// DoneTotal counts shards marked DONE over all epochs (K·Epochs at the
	// end, whatever the failures: duplicates are not in it).
	DoneTotal int64 `json:"done_total"`
	// Pulls counts shards handed out.
	Pulls int64 `json:"pulls"`
	// Completions counts DONE reports that marked a shard DONE.
	Completions int64 `json:"completions"`
	// Failures counts OpFail reports accepted.
	Failures int64 `json:"failures"`
	// Requeued counts shards put back to TODO (failures and deaths).
	Requeued int64 `json:"requeued"`
	// Duplicates counts DONE reports for shards already DONE or no longer
	// held by the reporter.
	Duplicates int64 `json:"duplicates"`
	// Finished is set once every epoch is DONE.
	Finished bool `json:"finished"`
}

// Stats returns the current summary.
func (q *Queue) Stats() Stats {
	st := Stats{
		Epoch: q.epoch, Epochs: q.cfg.Epochs, ShardsPerEpoch: q.k,
		Todo: int64(len(q.todo)), Doing: q.ndoing, Done: q.ndone,
		DoneTotal: q.stats.DoneTotal, Pulls: q.stats.Pulls, Completions: q.stats.Completions,
		Failures: q.stats.Failures, Requeued: q.stats.Requeued, Duplicates: q.stats.Duplicates,
		Finished: q.fin,
	}
	return st
}
