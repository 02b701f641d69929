package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
)

// FetchFlight reads the live flight recorders of the ranks at targets
// (their /debug/flight, the last calls of each), at most timeout each, in
// parallel; it returns the dumps it got and an error for each rank it
// could not read. token is the job's endpoint token (Token of the job
// secret; "" to send none), which ranks bound beyond loopback require.
func FetchFlight(targets []string, token string, last int, timeout time.Duration) ([]*flight.Dump, []error) {
	return fetchFlight(context.Background(), &http.Client{Timeout: timeout}, targets, token, last)
}

func fetchFlight(ctx context.Context, client *http.Client, targets []string, token string, last int) ([]*flight.Dump, []error) {
	dumps := make([]*flight.Dump, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dumps[i], errs[i] = fetchOne(ctx, client, t, token, last)
		}()
	}
	wg.Wait()
	var out []*flight.Dump
	var bad []error
	for i := range targets {
		if errs[i] != nil {
			bad = append(bad, errs[i])
		} else {
			out = append(out, dumps[i])
		}
	}
	return out, bad
}

func fetchOne(ctx context.Context, client *http.Client, target, token string, last int) (*flight.Dump, error) {
	url := fmt.Sprintf("http://%s/debug/flight?last=%d", target, last)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	authorize(req, token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("%s: %s: the rank wants the job's endpoint token: set RINGTAIL_SECRET or RINGTAIL_SECRET_FILE to the job secret", url, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return flight.Parse(b, url)
}

// flightMsg is the dashboard's story of the job from the ranks' flight
// recorders (kept sticky, replaced when it changes).
type flightMsg struct {
	Kind     string   `json:"kind"`
	Lines    []string `json:"lines"`
	Culprits []int    `json:"culprits"`
	Read     int      `json:"ranks_read"`
	Unread   []string `json:"unread,omitempty"`
	TMs      float64  `json:"t_ms"`
}

// flightPeriod is how often the dashboard reads the ranks' recorders;
// flightLast how many calls of each.
const (
	flightPeriod = 3 * time.Second
	flightLast   = 64
)

// followFlight reads the ranks' flight recorders every flightPeriod until
// ctx ends and publishes what Analyze makes of them when it changes.
func (d *Dashboard) followFlight(ctx context.Context) {
	client := &http.Client{Timeout: 2 * flightPeriod}
	var last string
	t := time.NewTicker(flightPeriod)
	defer t.Stop()
	for {
		dumps, errs := fetchFlight(ctx, client, d.cfg.Targets, d.token, flightLast)
		if ctx.Err() != nil {
			return
		}
		if len(dumps) > 0 {
			msg := flightMsg{Kind: "flight", Read: len(dumps), TMs: unixMs(time.Now())}
			for _, r := range flight.AnalyzeAll(dumps) {
				msg.Lines = append(msg.Lines, r.Lines...)
				msg.Culprits = append(msg.Culprits, r.Culprits...)
			}
			for _, err := range errs {
				msg.Unread = append(msg.Unread, err.Error())
			}
			key := fmt.Sprint(msg.Lines, len(msg.Unread))
			if key != last {
				last = key
				if b, err := json.Marshal(msg); err == nil {
					d.hub.publish(b, "flight")
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
