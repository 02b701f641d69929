package obs

import (
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"time"

	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/nvml"
)

// collStats is one collective's activity over a sampling window.
type collStats struct {
	Calls  float64 `json:"calls"`
	Bytes  float64 `json:"bytes"`
	BusBW  float64 `json:"busbw_gbps"` // decimal GB/s while in calls
	MeanUs float64 `json:"mean_us"`
}

// gpuStats is one GPU's reading.
type gpuStats struct {
	Index      int     `json:"index"`
	Name       string  `json:"name"`
	Util       float64 `json:"util"`
	MemUsed    uint64  `json:"mem_used"`
	MemTotal   uint64  `json:"mem_total"`
	PowerWatts float64 `json:"power_w"`
	ClockMHz   uint32  `json:"clock_mhz"`
}

// statsMsg is one sampling window of a rank on the event stream.
type statsMsg struct {
	Kind        string               `json:"kind"`
	Rank        int                  `json:"rank"`
	TMs         float64              `json:"t_ms"`
	BusBW       float64              `json:"busbw_gbps"` // over all collectives of the window
	Calls       float64              `json:"calls"`
	Collectives map[string]collStats `json:"collectives"`
	CPU         *float64             `json:"cpu_busy,omitempty"`
	NetRx       *float64             `json:"net_rx_bps,omitempty"`
	NetTx       *float64             `json:"net_tx_bps,omitempty"`
	GPUs        []gpuStats           `json:"gpus,omitempty"`
}

// sample runs until Close: every Period it publishes the window's call
// statistics and the host and GPU telemetry, and flushes the timeline.
func (r *Recorder) sample() {
	defer close(r.done)
	host, err := nvml.NewHostReader(r.cfg.HostProc)
	if err != nil {
		r.cfg.Logger.Debug().Err(err).Msg("obs: no host telemetry")
		host = nil
	} else {
		host.Read() // the baseline
	}
	gpu := r.cfg.GPU
	var prev [maxCollective]collTotals
	tlFailed := false
	tick := time.NewTicker(r.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-tick.C:
			msg := statsMsg{Kind: "stats", Rank: r.cfg.Rank, TMs: unixMs(now), Collectives: map[string]collStats{}}
			var bus, sec, calls float64
			for c := range r.m.coll {
				cm := &r.m.coll[c]
				if cm.duration == nil {
					continue
				}
				cur := cm.totals()
				p := prev[c]
				prev[c] = cur
				d := collTotals{cur.calls - p.calls, cur.bytes - p.bytes, cur.busBytes - p.busBytes, cur.timed - p.timed, cur.seconds - p.seconds}
				calls += d.calls
				if d.calls <= 0 || wire.Collective(c) == wire.Probe {
					continue
				}
				cs := collStats{Calls: d.calls, Bytes: d.bytes}
				if d.timed > 0 && d.seconds > 0 {
					mean := d.seconds / d.timed // the timed calls are a uniform sample
					cs.MeanUs = mean * 1e6
					cs.BusBW = d.busBytes / d.calls / mean / 1e9
					bus += d.busBytes
					sec += mean * d.calls
				}
				msg.Collectives[cm.name] = cs
				msg.Calls += d.calls
			}
			if sec > 0 {
				msg.BusBW = bus / sec / 1e9
			}
			// Time about timedPerSecond calls a second.
			mask := uint64(0)
			if rate := calls / r.cfg.Period.Seconds(); rate > timedPerSecond {
				mask = min(uint64(1)<<bits.Len64(uint64(rate/timedPerSecond))-1, maxMask)
			}
			r.mask.Store(mask)
			if host != nil {
				if hs, err := host.Read(); err == nil {
					r.m.hostCPU.Set(hs.CPUBusy)
					r.m.hostRx.Set(hs.NetRxBytesPerSec)
					r.m.hostTx.Set(hs.NetTxBytesPerSec)
					msg.CPU, msg.NetRx, msg.NetTx = &hs.CPUBusy, &hs.NetRxBytesPerSec, &hs.NetTxBytesPerSec
				} else if !errors.Is(err, nvml.ErrNoBaseline) {
					r.cfg.Logger.Debug().Err(err).Msg("obs: host telemetry stopped")
					host = nil
				}
			}
			if gpu != nil {
				samples, err := nvml.SampleAll(gpu)
				if err != nil && len(samples) == 0 {
					r.cfg.Logger.Debug().Err(err).Msg("obs: no GPU telemetry")
					gpu = nil
				}
				for _, s := range samples {
					g := gpuStats{Index: s.Index, Name: s.Name, Util: float64(s.GPUUtilPercent) / 100, MemUsed: s.MemoryUsedBytes,
						MemTotal: s.MemoryTotalBytes, PowerWatts: float64(s.PowerMilliwatts) / 1000, ClockMHz: s.SMClockMHz}
					msg.GPUs = append(msg.GPUs, g)
					idx, model := strconv.Itoa(s.Index), s.Model
					r.m.gpuUtil.WithLabelValues(idx, model).Set(g.Util)
					r.m.gpuMemUsed.WithLabelValues(idx, model).Set(float64(g.MemUsed))
					r.m.gpuMemTotal.WithLabelValues(idx, model).Set(float64(g.MemTotal))
					r.m.gpuPower.WithLabelValues(idx, model).Set(g.PowerWatts)
					r.m.gpuClock.WithLabelValues(idx, model).Set(float64(g.ClockMHz) * 1e6)
				}
			}
			if b, err := json.Marshal(msg); err == nil {
				r.hub.publish(b, "")
			}
			if r.tl != nil && !tlFailed {
				if err := r.tl.flush(); err != nil {
					tlFailed = true // said once; Close returns it too
					r.cfg.Logger.Warn().Err(err).Str("timeline", r.cfg.Timeline).Msg("obs: timeline write failed")
				}
			}
		}
	}
}
