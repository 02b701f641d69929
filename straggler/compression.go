package straggler

import (
	"fmt"
	"math"
	"time"
)

// CompressionConfig tunes a Compression. Zero fields take the defaults.
type CompressionConfig struct {
	// SampleEvery: while compression does not pay, every SampleEvery-th
	// message is sent compressed anyway so that the measurements stay
	// current (a gradient may grow sparser as training goes on). The first
	// message is always measured. 1 compresses every message. Default 8.
	SampleEvery int
	// Alpha is the weight of a new measurement in the moving averages of
	// the ratio and the encode throughput, in (0,1]. Default 0.3.
	Alpha float64
	// DecodeSpeedup is how many times faster the receiver decodes than the
	// sender encodes (the receiver's time is not measured here; s2 decodes
	// two to four times faster than it encodes). Default 2.
	DecodeSpeedup float64
	// Margin: compression is chosen only when the time it saves is at
	// least Margin times what it costs, so that a link near the break-even
	// point does not flip with every measurement. ≥ 1; default 1.2.
	Margin float64
}

// Defaults of a CompressionConfig.
const (
	DefaultCompressionSampleEvery   = 8
	DefaultCompressionAlpha         = 0.3
	DefaultCompressionDecodeSpeedup = 2.0
	DefaultCompressionMargin        = 1.2
)

// WithDefaults fills the zero fields.
func (c CompressionConfig) WithDefaults() CompressionConfig {
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultCompressionSampleEvery
	}
	if c.Alpha == 0 {
		c.Alpha = DefaultCompressionAlpha
	}
	if c.DecodeSpeedup == 0 {
		c.DecodeSpeedup = DefaultCompressionDecodeSpeedup
	}
	if c.Margin == 0 {
		c.Margin = DefaultCompressionMargin
	}
	return c
}

// Validate checks a configuration after WithDefaults.
func (c CompressionConfig) Validate() error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case c.SampleEvery < 1:
		return fmt.Errorf("straggler: compression sample interval %d must be ≥ 1: %w", c.SampleEvery, ErrInvalidConfig)
	case !(c.Alpha > 0 && c.Alpha <= 1):
		return fmt.Errorf("straggler: compression alpha %v must be in (0,1]: %w", c.Alpha, ErrInvalidConfig)
	case !(c.DecodeSpeedup > 0) || !finite(c.DecodeSpeedup):
		return fmt.Errorf("straggler: compression decode speedup %v must be finite and > 0: %w", c.DecodeSpeedup, ErrInvalidConfig)
	case !(c.Margin >= 1) || !finite(c.Margin):
		return fmt.Errorf("straggler: compression margin %v must be finite and ≥ 1: %w", c.Margin, ErrInvalidConfig)
	}
	return nil
}

// CompressionPays is the rule that decides whether a message of plain
// bytes is sent s2-compressed over a link of bandwidth bytes/s, given the
// measured ratio (wire bytes per plain byte) and encode throughput
// (plain bytes/s): the transfer time the compression saves,
// plain·(1−ratio)/bandwidth, against what it costs, encoding at
// encodeRate plus decoding decodeSpeedup times faster. It pays when
// saved ≥ margin·cost and something is saved. An unknown bandwidth,
// ratio or rate (≤ 0, NaN) never pays.
func CompressionPays(plain int64, bandwidth, ratio, encodeRate, decodeSpeedup, margin float64) (pays bool, saved, cost time.Duration) {
	if plain <= 0 || !(bandwidth > 0) || !(ratio > 0) || !(encodeRate > 0) || !(decodeSpeedup > 0) {
		return false, 0, 0
	}
	p := float64(plain)
	savedS := p * (1 - min(ratio, 1)) / bandwidth
	costS := p/encodeRate + p/(encodeRate*decodeSpeedup)
	saved, cost = seconds(savedS), seconds(costS)
	return savedS > 0 && savedS >= margin*costS, saved, cost
}

// seconds converts s to a Duration, saturating.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}

// Compression decides, for the messages one sender posts over one link
// (an evicted child's gradients to its parent), whether to send each one
// s2-compressed: from moving averages of the measured compression ratio
// and encode throughput and the link's probed bandwidth (CompressionPays).
// While compression does not pay it still compresses a sample of the
// messages (SampleEvery) to keep measuring. It is pure: the caller sends,
// times the encoding (the transport does) and reports each compressed
// message with Observe.
type Compression struct {
	cfg        CompressionConfig
	ratio      float64 // wire bytes per plain byte, moving average
	encodeRate float64 // plain bytes per second of encoding, moving average
	measured   int     // measurements folded in
	since      int     // messages sent plain since the last compressed one
}

// CompressionDecision is Compression's verdict on one message.
type CompressionDecision struct {
	// Compress says to send the message compressed: because it pays, or
	// as a Sample to measure.
	Compress, Sample bool
	// Pays is the verdict of CompressionPays on the current measurements,
	// and Saved and Cost its estimates for this message (zero while
	// nothing is measured or the bandwidth is unknown).
	Pays        bool
	Saved, Cost time.Duration
}

// NewCompression validates cfg (after WithDefaults) and returns a
// Compression with nothing measured.
func NewCompression(cfg CompressionConfig) (*Compression, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Compression{cfg: cfg}, nil
}

// Decide returns the verdict on the next message, of plain bytes, over a
// link of bandwidth bytes/s (≤ 0: unknown, and then nothing is ever
// compressed: there is no speed to weigh the cost against).
func (c *Compression) Decide(plain int64, bandwidth float64) CompressionDecision {
	if plain <= 0 || !(bandwidth > 0) {
		return CompressionDecision{}
	}
	var d CompressionDecision
	d.Pays, d.Saved, d.Cost = CompressionPays(plain, bandwidth, c.ratio, c.encodeRate, c.cfg.DecodeSpeedup, c.cfg.Margin)
	switch {
	case d.Pays:
		d.Compress = true
	case c.measured == 0 || c.since+1 >= c.cfg.SampleEvery:
		d.Compress, d.Sample = true, true
	}
	if d.Compress {
		c.since = 0
	} else {
		c.since++
	}
	return d
}

// Observe folds in one compressed message's measurement: plain bytes sent
// as wire bytes (the frames compression did not shrink count plain), with
// encode spent compressing.
func (c *Compression) Observe(plain, wire int64, encode time.Duration) error {
	if plain <= 0 || wire < 0 || encode < 0 {
		return fmt.Errorf("straggler: compression of %d bytes into %d in %v: %w", plain, wire, encode, ErrBadObservation)
	}
	ratio := min(float64(wire)/float64(plain), 1)
	rate := float64(plain) / max(encode.Seconds(), 1e-6) // below a microsecond: the clock's resolution
	if c.measured == 0 {
		c.ratio, c.encodeRate = ratio, rate
	} else {
		a := c.cfg.Alpha
		c.ratio = a*ratio + (1-a)*c.ratio
		c.encodeRate = a*rate + (1-a)*c.encodeRate
	}
	c.measured++
	return nil
}

// Ratio returns the measured wire bytes per plain byte (0 before the
// first measurement).
func (c *Compression) Ratio() float64 { return c.ratio }

// EncodeRate returns the measured encode throughput in plain bytes/s (0
// before the first measurement).
func (c *Compression) EncodeRate() float64 { return c.encodeRate }

// Measured returns the number of measurements folded in.
func (c *Compression) Measured() int { return c.measured }
