package shard

// Shorthands of the tests for Queue.Apply's commands and views of the
// queue's state (the service and the WAL apply Commands).

// Pull is Apply(Command{Op: OpPull, Worker: worker}).
func (q *Queue) Pull(worker string) (Shard, error) {
	r, err := q.Apply(Command{Op: OpPull, Worker: worker})
	return r.Shard, err
}

// Done is Apply(Command{Op: OpDone, ...}); it reports whether the report
// was a duplicate.
func (q *Queue) Done(worker string, id int64) (bool, error) {
	r, err := q.Apply(Command{Op: OpDone, Worker: worker, Shard: id})
	return r.Duplicate, err
}

// Fail is Apply(Command{Op: OpFail, ...}).
func (q *Queue) Fail(worker string, id int64) error {
	_, err := q.Apply(Command{Op: OpFail, Worker: worker, Shard: id})
	return err
}

// WorkerDied is Apply(Command{Op: OpDied, ...}); it returns the requeued
// shard IDs (at most one: the shard the worker held).
func (q *Queue) WorkerDied(worker string) []int64 {
	r, _ := q.Apply(Command{Op: OpDied, Worker: worker})
	return r.Requeued
}

// Todo returns the TODO shards in queue order.
func (q *Queue) Todo() []Shard {
	out := make([]Shard, len(q.todo))
	for n, i := range q.todo {
		out[n] = q.shard(q.epoch, i)
	}
	return out
}

// Doing returns the DOING shards in index order.
func (q *Queue) Doing() []Assignment {
	var out []Assignment
	for i := range q.k {
		if q.state[i] == Doing {
			out = append(out, Assignment{Shard: q.shard(q.epoch, i), Worker: q.owner[i]})
		}
	}
	return out
}
