package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// MissingRanksError is the failure of MonitoredBarrier: the ranks that did
// not reach it within Timeout, as rank 0 saw them.
type MissingRanksError struct {
	Ranks   []int // in rank order
	Timeout time.Duration
	// Rank is the rank reporting the error; when it is not 0 it reached
	// the barrier and relays rank 0's verdict.
	Rank int
}

func (e *MissingRanksError) Error() string {
	names := make([]string, len(e.Ranks))
	for i, r := range e.Ranks {
		names[i] = strconv.Itoa(r)
	}
	// Gloo's wording, which scripts and people grep for.
	what := "Rank " + names[0]
	if len(names) > 1 {
		what = "Ranks " + strings.Join(names, ", ")
	}
	msg := fmt.Sprintf("%s failed to pass monitoredBarrier in %d ms", what, e.Timeout.Milliseconds())
	if e.Rank != 0 {
		return fmt.Sprintf("ringtail: rank %d passed the monitored barrier, rank 0 reports: %s", e.Rank, msg)
	}
	return "ringtail: " + msg
}

// MonitoredBarrier is a barrier that names the ranks that did not arrive
// (torch.distributed.monitored_barrier): every rank tells rank 0 it has
// arrived; rank 0 waits at most timeout for them (for the first missing
// rank only, unless waitAll) and tells every rank the verdict. On rank 0
// the missing ranks become a *MissingRanksError; the ranks that arrived
// return the same error, relayed; a rank that hears nothing from rank 0
// within twice the timeout (rank 0 may arrive up to timeout after it, then
// wait up to timeout) returns an error naming rank 0. The communicator
// stays usable: a late rank's arrival is recognised as stale by the next
// barrier. Calls are serialised.
func (m *Mailbox) MonitoredBarrier(ctx context.Context, timeout time.Duration, waitAll bool) error {
	if timeout <= 0 {
		return fmt.Errorf("ringtail: monitored barrier timeout %v must be positive", timeout)
	}
	if m.e.s.World == 1 {
		return nil
	}
	m.barrierMu.Lock()
	defer m.barrierMu.Unlock()
	m.barriers++
	if m.me != 0 {
		return m.barrierMember(ctx, m.barriers, timeout)
	}
	return m.barrierRoot(ctx, m.barriers, timeout, waitAll)
}

func (m *Mailbox) barrierMember(ctx context.Context, seq uint32, timeout time.Duration) error {
	arrive := binary.LittleEndian.AppendUint32(nil, seq)
	s, err := m.Start(0, tagArrive, arrive, reduce.Uint8)
	if err != nil {
		return err
	}
	if err := s.Wait(ctx); err != nil {
		return fmt.Errorf("ringtail: monitored barrier: rank %d telling rank 0 it arrived: %w", m.me, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	verdict := make([]byte, verdictLen(m.e.s.World))
	for {
		r, err := m.Post(0, tagVerdict, verdict, reduce.Uint8)
		if err != nil {
			return err
		}
		if _, err := r.Wait(wctx); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("ringtail: rank %d reached the monitored barrier but rank 0 gave no verdict within %v (rank 0 late or stuck): %w", m.me, 2*timeout, err)
			}
			return err
		}
		if binary.LittleEndian.Uint32(verdict) != seq {
			continue // a verdict of an earlier barrier this rank was late for
		}
		if missing := bitmapRanks(verdict[4:], m.e.s.World); len(missing) > 0 {
			return &MissingRanksError{Ranks: missing, Timeout: timeout, Rank: m.me}
		}
		return nil
	}
}

func (m *Mailbox) barrierRoot(ctx context.Context, seq uint32, timeout time.Duration, waitAll bool) error {
	w := m.e.s.World
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var missing []int
	buf := make([]byte, 4)
	for r := 1; r < w; r++ {
		if len(missing) > 0 && !waitAll {
			break // like Gloo: the first rank that failed is enough
		}
		for {
			rc, err := m.Post(r, tagArrive, buf, reduce.Uint8)
			if err != nil {
				return err
			}
			if _, err := rc.Wait(wctx); err != nil {
				if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				missing = append(missing, r)
				break
			}
			if binary.LittleEndian.Uint32(buf) == seq {
				break
			}
			// the arrival of an earlier barrier rank r was late for: skip it
		}
	}
	verdict := make([]byte, verdictLen(w))
	binary.LittleEndian.PutUint32(verdict, seq)
	for _, r := range missing {
		verdict[4+r/8] |= 1 << (r % 8)
	}
	var sends []*Sending
	for r := 1; r < w; r++ {
		s, err := m.Start(r, tagVerdict, verdict, reduce.Uint8)
		if err != nil {
			return err
		}
		if !slices.Contains(missing, r) {
			sends = append(sends, s) // a missing rank may be stuck: do not wait on it
		}
	}
	for _, s := range sends {
		if err := s.Wait(ctx); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return &MissingRanksError{Ranks: missing, Timeout: timeout}
	}
	return nil
}

func verdictLen(w int) int { return 4 + (w+7)/8 }

func bitmapRanks(bits []byte, w int) []int {
	var out []int
	for r := range w {
		if bits[r/8]&(1<<(r%8)) != 0 {
			out = append(out, r)
		}
	}
	return out
}
