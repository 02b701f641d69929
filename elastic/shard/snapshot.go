package shard

import (
	"fmt"
	"slices"
)

// Snapshot is a Queue's complete state as plain data, for persistence.
// Restore(q.Snapshot()) is a queue that behaves exactly like q.
type Snapshot struct {
	// Config is the job configuration.
	Config Config `json:"config"`
	// Epoch is the current epoch.
	Epoch int `json:"epoch"`
	// Todo lists TODO shard indices in queue order.
	Todo []int64 `json:"todo"`
	// Doing lists DOING shard indices with their holders, index order.
	Doing []Holder `json:"doing"`
	// Done lists DONE shard indices of the current epoch, ascending.
	Done []int64 `json:"done"`
	// Counters are the running totals.
	Counters counters `json:"counters"`
	// Finished is set after the last epoch.
	Finished bool `json:"finished"`
}

// Holder is a DOING shard index and its worker.
type Holder struct {
	// Index is the shard index in the epoch.
	Index int64 `json:"index"`
	// Worker holds the shard.
	Worker string `json:"worker"`
}

// Snapshot returns the queue's state.
func (q *Queue) Snapshot() Snapshot {
	s := Snapshot{Config: q.cfg, Epoch: q.epoch, Todo: slices.Clone(q.todo), Counters: q.stats, Finished: q.fin}
	if s.Todo == nil {
		s.Todo = []int64{}
	}
	for i := range q.k {
		switch q.state[i] {
		case Doing:
			s.Doing = append(s.Doing, Holder{Index: i, Worker: q.owner[i]})
		case Done:
			s.Done = append(s.Done, i)
		}
	}
	return s
}

// Restore rebuilds a queue from a snapshot, checking that every shard of
// the epoch is in exactly one state.
func Restore(s Snapshot) (*Queue, error) {
	if err := s.Config.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{cfg: s.Config, k: s.Config.NumShards()}
	if s.Epoch < 0 || s.Epoch >= s.Config.Epochs {
		return nil, fmt.Errorf("%w: snapshot epoch %d outside 0..%d", ErrInvalidConfig, s.Epoch, s.Config.Epochs-1)
	}
	q.epoch = s.Epoch
	q.state = make([]State, q.k)
	q.owner = make([]string, q.k)
	q.held = map[string]int64{}
	seen := make([]bool, q.k)
	mark := func(i int64) error {
		if i < 0 || i >= q.k || seen[i] {
			return fmt.Errorf("%w: snapshot lists shard index %d twice or out of range", ErrInvalidConfig, i)
		}
		seen[i] = true
		return nil
	}
	for _, i := range s.Todo {
		if err := mark(i); err != nil {
			return nil, err
		}
	}
	q.todo = slices.Clone(s.Todo)
	for _, h := range s.Doing {
		if err := mark(h.Index); err != nil {
			return nil, err
		}
		if err := ValidateWorkerID(h.Worker); err != nil {
			return nil, err
		}
		if _, dup := q.held[h.Worker]; dup {
			return nil, fmt.Errorf("%w: snapshot has worker %q holding two shards", ErrInvalidConfig, h.Worker)
		}
		q.held[h.Worker] = h.Index
		q.state[h.Index], q.owner[h.Index] = Doing, h.Worker
		q.ndoing++
	}
	for _, i := range s.Done {
		if err := mark(i); err != nil {
			return nil, err
		}
		q.state[i] = Done
		q.ndone++
	}
	if n := int64(len(s.Todo)) + q.ndoing + q.ndone; n != q.k {
		return nil, fmt.Errorf("%w: snapshot accounts for %d of %d shards", ErrInvalidConfig, n, q.k)
	}
	q.stats, q.fin = s.Counters, s.Finished
	return q, nil
}
