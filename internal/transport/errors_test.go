package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A timeout says "Timed out" (torch's convention), names the call once and
// each rank once, without the kind or the context's error said again;
// other kinds render as before.
func TestErrorRendering(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{Kind: KindTimeout, Rank: 2, Reporter: 0, Local: 0, Detail: "in Barrier", Err: context.DeadlineExceeded},
			"ringtail rank 0: Timed out in Barrier waiting on rank 2"},
		{Error{Kind: KindTimeout, Rank: 2, Reporter: 0, Local: 1, Detail: "in Barrier"},
			"ringtail rank 1: Timed out in Barrier: rank 0 was waiting on rank 2"},
		{Error{Kind: KindCanceled, Rank: 1, Reporter: 3, Local: 3, Detail: "in AllReduce", Err: context.Canceled},
			"ringtail rank 3: Canceled in AllReduce waiting on rank 1"},
		{Error{Kind: KindTimeout, Rank: NoRank, Reporter: 0, Local: 0, Detail: "in recv of tag 5 from any rank", Err: context.DeadlineExceeded},
			"ringtail rank 0: Timed out in recv of tag 5 from any rank"},
		{Error{Kind: KindTimeout, Rank: 1, Reporter: 0, Local: 0, Err: errors.New("link stuck")},
			"ringtail rank 0: Timed out waiting on rank 1: link stuck"},
		{Error{Kind: KindPeerDied, Rank: 2, Reporter: 1, Local: 0, Detail: "connection closed"},
			"ringtail rank 0: peer died: rank 2: connection closed (reported by rank 1)"},
	}
	for _, c := range cases {
		got := c.e.Error()
		if got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	// Wrapped, the context's error is still found.
	e := &Error{Kind: KindTimeout, Rank: 2, Reporter: 0, Local: 0, Detail: "in Barrier", Err: context.DeadlineExceeded}
	if !errors.Is(fmt.Errorf("capi: %w", e), context.DeadlineExceeded) {
		t.Error("the deadline is lost from the chain")
	}
	if strings.Contains(e.Error(), "deadline") {
		t.Errorf("%q repeats the deadline", e.Error())
	}
}
