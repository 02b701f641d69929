package engine

import "github.com/ringtail-ml/ringtail/internal/wire"

// LinkInfo is one link of the mesh as observability reports it.
type LinkInfo struct {
	Peer, Channel int
	// Transport is transport.Link.Transport: "shm+fastbox", "unix", "tcp" ...
	Transport string
	// Fallback says why the link is not shared memory although it could
	// be ("": it is, or need not be).
	Fallback string
}

// Links lists this rank's links in (peer, channel) order; none in a
// single-rank job.
func (e *Engine) Links() []LinkInfo {
	if e.mesh == nil {
		return nil
	}
	var out []LinkInfo
	for peer := 0; peer < e.s.WorldSize; peer++ {
		if peer == e.s.Rank {
			continue
		}
		for ch := 0; ch < e.tun.Channels; ch++ {
			if l := e.mesh.Link(peer, ch); l != nil {
				out = append(out, LinkInfo{Peer: peer, Channel: ch, Transport: l.Transport(), Fallback: l.Fallback()})
			}
		}
	}
	return out
}

// ranks is the number of ranks taking part in c.
func (e *Engine) ranks(c *Call) int {
	switch {
	case c.Spec.Members != nil:
		return len(c.Spec.Members)
	case c.Spec.Collective == wire.PointToPoint:
		return 2
	}
	return e.s.WorldSize
}

// traceExecutor gives the executor the tracer when it wants phases.
func (e *Engine) traceExecutor() {
	if e.s.Tracer != nil && e.s.TracePhases {
		e.executor.SetTracer(e.s.Tracer)
	}
}
