package straggler

// clockScale lets the default (EWMA) predictor use the GPU clock the
// ranks report (RankReport.SMClockMHz, from NVML): a compute-bound
// sample's time scales with 1/clock, so the EWMA averages per-sample
// times normalised to the rank's first reported clock and the forecast is
// scaled back by the clock of the latest report. A rank whose clock drops
// (thermal or power throttling) is predicted slower at once, rather than
// after the EWMA has caught up over several steps; at a constant clock,
// or without clock readings (no GPU), the forecast is exactly the plain
// EWMA's. Utilisation and the clocks' throttle reasons are not used: a
// throttled clock already carries the slowdown, and the report carries
// no reasons.
type clockScale struct {
	// ref is the rank's first reported clock, last its latest (0: the
	// latest report had none).
	ref, last float64
}

// normalise returns tau at the rank's reference clock and records the
// report's clock.
func (c *clockScale) normalise(tau float64, rr *RankReport) float64 {
	clock := rr.SMClockMHz
	if !(clock > 0) {
		c.last = 0
		return tau
	}
	if c.ref == 0 {
		c.ref = clock
	}
	c.last = clock
	if clock == c.ref {
		return tau // exactly the plain EWMA's input at the reference clock
	}
	return tau * clock / c.ref
}

// forecast scales a normalised forecast to the latest clock.
func (c *clockScale) forecast(f float64) float64 {
	if c.last > 0 && c.last != c.ref {
		return f * c.ref / c.last
	}
	return f
}

// clockOf returns rank r's clock state, allocating every rank's on first
// use (the Policy's zero value has none).
func (es *estimator) clockOf(r int) *clockScale {
	if es.clocks == nil {
		es.clocks = make([]clockScale, es.cfg.World)
	}
	return &es.clocks[r]
}
