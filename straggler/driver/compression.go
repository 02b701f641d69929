package driver

import (
	"context"
	"slices"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
)

// compressingComm is a Comm that can send a contribution s2-compressed
// (*ringtail.Comm). A Comm without it sends every gradient plain.
type compressingComm interface {
	ContributeAsyncWith(ctx context.Context, peer int, buf ringtail.Buffer, tag uint32, opts ringtail.PostOptions) (*ringtail.Posting, error)
}

var _ compressingComm = (*ringtail.Comm)(nil)

// WireStats says how a child's gradients travel to its parent: plain, or
// s2-compressed when the measured compressibility and the probed
// bandwidth of the link say it pays (straggler.Compression).
type WireStats struct {
	// Compressed says this step's gradient is sent compressed; Sampled
	// that it is compressed to measure, not because it pays.
	Compressed, Sampled bool
	// Bandwidth is the probed bandwidth to the parent in bytes/s (0:
	// unknown, and nothing is compressed).
	Bandwidth float64
	// Ratio (wire bytes per plain byte) and EncodeRate (plain bytes/s)
	// are the moving averages measured so far (0 before the first).
	Ratio, EncodeRate float64
	// CompressedPosts counts the gradients sent compressed whose sends
	// have completed, PlainBytes their size and WireBytes what they took
	// on the wire, over the run.
	CompressedPosts       int
	PlainBytes, WireBytes int64
}

// gradientWire posts a child's gradients, compressed when its
// straggler.Compression says so, and folds what each compressed send cost
// into it once the send completes. Owned by the Driver's goroutine.
type gradientWire struct {
	est     *straggler.Compression
	pending []*ringtail.Posting // compressed sends not yet accounted
	stats   WireStats
	pays    bool // the last verdict, to log its changes
}

// post sends buf to parent as a gradient message tagged t; bw is the
// probed bandwidth to the parent (≤ 0: unknown).
func (g *gradientWire) post(ctx context.Context, comm Comm, parent int, bw float64, buf []float32, t uint32, log zerolog.Logger) (*ringtail.Posting, error) {
	g.reap(log)
	cc, ok := comm.(compressingComm)
	if !ok || g.est == nil && !g.init(log) {
		g.stats.Compressed, g.stats.Sampled = false, false
		return comm.ContributeAsync(ctx, parent, ringtail.Float32s(buf), t)
	}
	d := g.est.Decide(4*int64(len(buf)), bw)
	g.stats.Compressed, g.stats.Sampled, g.stats.Bandwidth = d.Compress, d.Sample, max(bw, 0)
	if d.Pays != g.pays {
		log.Info().Int("parent", parent).Bool("compress", d.Pays).Float64("ratio", g.est.Ratio()).
			Float64("encode_MBps", g.est.EncodeRate()/1e6).Float64("link_MBps", bw/1e6).
			Dur("saved", d.Saved).Dur("cost", d.Cost).Msg("driver: gradient compression changes")
		g.pays = d.Pays
	}
	p, err := cc.ContributeAsyncWith(ctx, parent, ringtail.Float32s(buf), t, ringtail.PostOptions{Compress: d.Compress})
	if err == nil && d.Compress {
		g.pending = append(g.pending, p)
	}
	return p, err
}

// init creates the estimator; false (logged) if it cannot be.
func (g *gradientWire) init(log zerolog.Logger) bool {
	est, err := straggler.NewCompression(straggler.CompressionConfig{})
	if err != nil { // the defaults are valid; kept plain if that ever changes
		log.Error().Err(err).Msg("driver: gradient compression disabled")
		return false
	}
	g.est = est
	return true
}

// reap accounts the compressed sends that have completed.
func (g *gradientWire) reap(log zerolog.Logger) {
	g.pending = slices.DeleteFunc(g.pending, func(p *ringtail.Posting) bool {
		st, ok := p.Stats()
		if !ok {
			return false
		}
		if st.Bytes > 0 {
			if err := g.est.Observe(st.Bytes, st.WireBytes, st.Encode); err != nil {
				log.Warn().Err(err).Msg("driver: gradient compression measurement")
			}
		}
		g.stats.CompressedPosts++
		g.stats.PlainBytes += st.Bytes
		g.stats.WireBytes += st.WireBytes
		log.Debug().Int64("bytes", st.Bytes).Int64("wire_bytes", st.WireBytes).Int("frames", st.Frames).
			Int("compressed_frames", st.Compressed).Dur("encode", st.Encode).Float64("ratio", g.est.Ratio()).
			Msg("driver: compressed gradient sent")
		return true
	})
	if g.est != nil {
		g.stats.Ratio, g.stats.EncodeRate = g.est.Ratio(), g.est.EncodeRate()
	}
}

// bandwidth returns the probed bandwidth from rank a to rank b (0:
// unknown).
func bandwidth(cfg straggler.Config, a, b int) float64 {
	if a < 0 || b < 0 || a >= len(cfg.Bandwidth) || b >= len(cfg.Bandwidth[a]) {
		return 0
	}
	return cfg.Bandwidth[a][b]
}
