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
	// Exhausted: rank 0's own timeout ran out before it could wait for
	// Ranks (a zero timeout, say): Gloo's "Rank 0 timed out in
	// monitoredBarrier", naming Processed, the ranks it had heard from.
	Exhausted bool
	Processed []int
}

func joinRanks(ranks []int) string {
	names := make([]string, len(ranks))
	for i, r := range ranks {
		names[i] = strconv.Itoa(r)
	}
	return strings.Join(names, ", ")
}

// Error words the failure as torch's ProcessGroupGloo does, which torch's
// tests, scripts and people grep for: on rank 0 "Rank 1 failed to pass
// monitoredBarrier in 2000 ms" ("Ranks 1, 2 ..." with wait_all_ranks), or
// "Rank 0 timed out in monitoredBarrier after 0 ms." when its own time ran
// out first; on a rank that arrived, "Rank 2 successfully reached
// monitoredBarrier, but received errors while waiting for send/recv from
// rank 0", then rank 0's verdict.
func (e *MissingRanksError) Error() string {
	var msg string
	switch {
	case e.Exhausted:
		msg = fmt.Sprintf("Rank 0 timed out in monitoredBarrier after %d ms.", e.Timeout.Milliseconds())
		if len(e.Processed) > 0 {
			msg += " Successfully processed ranks: " + joinRanks(e.Processed)
		} else {
			msg += " No ranks successfully processed in monitoredBarrier."
		}
	case len(e.Ranks) == 1:
		msg = fmt.Sprintf("Rank %d failed to pass monitoredBarrier in %d ms", e.Ranks[0], e.Timeout.Milliseconds())
	default:
		msg = fmt.Sprintf("Ranks %s failed to pass monitoredBarrier in %d ms", joinRanks(e.Ranks), e.Timeout.Milliseconds())
	}
	if e.Rank != 0 {
		return memberFailed(e.Rank) + ": rank 0 reports: " + msg
	}
	return "ringtail: " + msg
}

// memberFailed is Gloo's words for a rank that reached the monitored
// barrier but did not pass it.
func memberFailed(rank int) string {
	return fmt.Sprintf("ringtail: Rank %d successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0", rank)
}

// BarrierMemberError is the failure of MonitoredBarrier on a rank other
// than 0 that arrived but heard no verdict from rank 0 (rank 0 late,
// stuck or gone); Err is why.
type BarrierMemberError struct {
	Rank   int
	Reason string
	Err    error
}

func (e *BarrierMemberError) Error() string { return memberFailed(e.Rank) + ": " + e.Reason }

// Unwrap returns the cause.
func (e *BarrierMemberError) Unwrap() error { return e.Err }

// MonitoredBarrier is a barrier that names the ranks that did not arrive
// (torch.distributed.monitored_barrier, with ProcessGroupGloo's
// semantics): every rank tells rank 0 it has arrived; rank 0 waits at
// most timeout for them, in rank order, and tells every rank the verdict.
// Without waitAll rank 0 fails on the first missing rank, and, when its
// timeout has run out before it could wait for the next rank (a zero
// timeout), says it timed out itself; with waitAll it names every missing
// rank. On rank 0 the failure is a *MissingRanksError; the ranks that
// arrived return the same error, relayed. A rank other than 0 waits for
// rank 0's verdict up to the operation timeout (the group's, as Gloo's
// ranks do; at least twice timeout) and then fails with a
// *BarrierMemberError. The communicator stays usable: a late rank's
// arrival is recognised as stale by the next barrier. Calls are
// serialised.
func (m *Mailbox) MonitoredBarrier(ctx context.Context, timeout time.Duration, waitAll bool) error {
	if timeout < 0 {
		return fmt.Errorf("ringtail: monitored barrier timeout %v must not be negative", timeout)
	}
	if m.e.s.WorldSize == 1 {
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
		return &BarrierMemberError{Rank: m.me, Reason: "telling rank 0 it arrived failed", Err: err}
	}
	wait := max(2*timeout, m.e.s.OpTimeout)
	if wait <= 0 {
		wait = 2 * time.Minute // no operation timeout and a zero timeout: still bounded
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w := m.e.s.WorldSize
	verdict := make([]byte, verdictLen(w))
	for {
		r, err := m.Post(0, tagVerdict, verdict, reduce.Uint8)
		if err != nil {
			return err
		}
		if _, err := r.Wait(wctx); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return &BarrierMemberError{Rank: m.me, Err: err,
					Reason: fmt.Sprintf("no verdict within %v (rank 0 late or stuck)", wait)}
			}
			return &BarrierMemberError{Rank: m.me, Reason: "waiting for rank 0's verdict failed", Err: err}
		}
		if binary.LittleEndian.Uint32(verdict) != seq {
			continue // a verdict of an earlier barrier this rank was late for
		}
		missing := bitmapRanks(verdict[5:], w)
		if verdict[4]&verdictExhausted != 0 {
			return &MissingRanksError{Ranks: missing, Timeout: timeout, Rank: m.me, Exhausted: true,
				Processed: processedBefore(missing, w)}
		}
		if len(missing) > 0 {
			return &MissingRanksError{Ranks: missing, Timeout: timeout, Rank: m.me}
		}
		return nil
	}
}

// processedBefore is the ranks rank 0 heard from before its timeout ran
// out: those before the first of unprocessed (every rank but 0 when none).
func processedBefore(unprocessed []int, w int) []int {
	end := w
	if len(unprocessed) > 0 {
		end = unprocessed[0]
	}
	var out []int
	for r := 1; r < end; r++ {
		out = append(out, r)
	}
	return out
}

func (m *Mailbox) barrierRoot(ctx context.Context, seq uint32, timeout time.Duration, waitAll bool) error {
	w := m.e.s.WorldSize
	deadline := time.Now().Add(timeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var missing []int
	exhausted := false
	buf := make([]byte, 4)
	for r := 1; r < w; r++ {
		if len(missing) > 0 && !waitAll {
			break // like Gloo: the first rank that failed is enough
		}
		if !waitAll && !time.Now().Before(deadline) {
			// Gloo's checkRemainingTime: no time left to wait for rank r.
			exhausted = true
			for q := r; q < w; q++ {
				missing = append(missing, q)
			}
			break
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
	if exhausted {
		verdict[4] = verdictExhausted
	}
	for _, r := range missing {
		verdict[5+r/8] |= 1 << (r % 8)
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
	if exhausted {
		return &MissingRanksError{Ranks: missing, Timeout: timeout, Exhausted: true, Processed: processedBefore(missing, w)}
	}
	if len(missing) > 0 {
		return &MissingRanksError{Ranks: missing, Timeout: timeout}
	}
	return nil
}

// A verdict is the barrier's sequence number (4 bytes), flags (1 byte)
// and a bitmap of the missing ranks (of the ranks rank 0 did not get to,
// when verdictExhausted is set).
const verdictExhausted = 1

func verdictLen(w int) int { return 5 + (w+7)/8 }

func bitmapRanks(bits []byte, w int) []int {
	var out []int
	for r := range w {
		if bits[r/8]&(1<<(r%8)) != 0 {
			out = append(out, r)
		}
	}
	return out
}
