package ringtail

import (
	"context"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// DefaultFlightSize is how many calls the flight recorder keeps by
// default (Config.FlightSize, RINGTAIL_FLIGHT_SIZE).
const DefaultFlightSize = flight.DefaultSize

// WithCallSite returns ctx naming site as the call site of the
// collectives called with it, for the call-site check (Config.Debug
// "detail") of a binding whose callers are not Go code: the C API takes
// it from rt_call_site, the PyTorch backend from the Python stack. Ranks
// must name the same call the same way. Without it the check hashes the
// Go caller's program counters.
func WithCallSite(ctx context.Context, site string) context.Context {
	return engine.WithCallSite(ctx, site)
}
