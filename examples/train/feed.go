package train

import (
	"context"
	"errors"
	"time"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
)

// ShardSource is the part of the shard service's client a feed uses;
// *service.Client implements it.
type ShardSource interface {
	// Pull returns the shard worker holds, or the next TODO one
	// (shard.ErrNoShard: none now; shard.ErrFinished: every epoch done).
	Pull(ctx context.Context, worker string) (shard.Shard, error)
	// Done reports the shard trained: its gradients are in the model.
	Done(ctx context.Context, worker string, shardID int64) error
	// Fail hands the shard back (to the end of the TODO queue).
	Fail(ctx context.Context, worker string, shardID int64) error
}

var _ ShardSource = (*service.Client)(nil)

// feedCallTimeout bounds one call to the shard service from a step: a
// service that does not answer costs the step this much, and the call is
// retried next step.
const feedCallTimeout = 2 * time.Second

// pendingBatch is a batch this rank trained in a step whose commit by
// rank 0 is not yet known.
type pendingBatch struct {
	step     uint64
	from, to int // positions in the held shard's sample order
	last     bool
}

// feed is one elastic rank's data: the shard it holds (a worker holds one
// shard until its DONE is acknowledged), its position in it, and the
// batches of steps rank 0 may not have committed. A batch counts as
// trained — recorded, and the shard reported DONE once all its batches
// are — only once committed (elastic.Generation): batches of rolled-back
// steps are trained again, so every sample is trained at least once.
// Owned by the goroutine running the step function.
type feed struct {
	src      ShardSource
	worker   string
	batch    int
	held     *shard.Shard
	idx      []int64
	pos      int
	pending  []pendingBatch
	owesDone bool // every batch of held is committed; DONE not yet acknowledged
	finished bool // Pull said every epoch is DONE
	epoch    int  // epoch of the last shard pulled (0-based)
	done     int  // shards this rank reported DONE
}

// rollback drops the batches of step and later (rank 0 did not commit
// them) so that they are trained again.
func (f *feed) rollback(step uint64) {
	keep := f.pending[:0]
	for _, b := range f.pending {
		if b.step >= step {
			f.pos = min(f.pos, b.from)
			continue
		}
		keep = append(keep, b)
	}
	f.pending = keep
}

// commit records the batches of steps before step (committed by rank 0)
// and reports the held shard DONE once its last batch is committed.
func (f *feed) commit(ctx context.Context, step uint64) error {
	keep := f.pending[:0]
	for _, b := range f.pending {
		if b.step >= step {
			keep = append(keep, b)
		} else if b.last {
			f.owesDone = true
		}
	}
	f.pending = keep
	return f.reportDone(ctx)
}

// reportDone sends the DONE the feed owes; a service that is down is
// asked again next step.
func (f *feed) reportDone(ctx context.Context) error {
	if !f.owesDone {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, feedCallTimeout)
	defer cancel()
	if err := f.src.Done(cctx, f.worker, f.held.ID); err != nil {
		if retryable(ctx, err) {
			return nil
		}
		return err
	}
	f.owesDone, f.held, f.idx, f.pos = false, nil, nil, 0
	f.done++
	return nil
}

// retryable reports whether a shard-service call may be retried next step
// (the service is down or slow) rather than failing the rank.
func retryable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, service.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded))
}

// next returns the rows to train in step (empty when this rank has none
// now), pulling a shard when it holds none.
func (f *feed) next(ctx context.Context, step uint64) (pendingBatch, []int, error) {
	if f.held == nil && !f.finished {
		cctx, cancel := context.WithTimeout(ctx, feedCallTimeout)
		sh, err := f.src.Pull(cctx, f.worker)
		cancel()
		switch {
		case err == nil:
			f.held, f.idx, f.pos = &sh, sh.Indices(), 0
			f.epoch = max(f.epoch, sh.Epoch)
		case errors.Is(err, shard.ErrFinished):
			f.finished = true
		case errors.Is(err, shard.ErrNoShard), retryable(ctx, err):
		default:
			return pendingBatch{}, nil, err
		}
	}
	if f.held == nil || f.owesDone || f.pos >= len(f.idx) {
		return pendingBatch{}, nil, nil
	}
	end := min(f.pos+f.batch, len(f.idx))
	rows := make([]int, 0, end-f.pos)
	for _, i := range f.idx[f.pos:end] {
		rows = append(rows, int(i))
	}
	return pendingBatch{step: step, from: f.pos, to: end, last: end == len(f.idx)}, rows, nil
}

// trained records that b's step completed here (it is pending until
// committed).
func (f *feed) trained(b pendingBatch) {
	f.pending = append(f.pending, b)
	f.pos = b.to
}

// busy reports whether this rank still has data to train or to commit.
func (f *feed) busy() bool {
	return !f.finished || f.held != nil || len(f.pending) > 0
}

// giveBack settles the held shard when the rank stops: a DONE still owed
// is sent, an unfinished shard is handed back (TODO at once, instead of
// when the connection closes).
func (f *feed) giveBack(ctx context.Context) error {
	if f.held == nil {
		return nil
	}
	if f.owesDone {
		return f.reportDone(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, feedCallTimeout)
	defer cancel()
	return f.src.Fail(ctx, f.worker, f.held.ID)
}
