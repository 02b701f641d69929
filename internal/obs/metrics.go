package obs

import (
	"math"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Metric names, as docs/observability.md lists them.
const (
	MetricCalls          = "ringtail_calls_total"
	MetricCallBytes      = "ringtail_call_bytes_total"
	MetricCallBusBytes   = "ringtail_call_bus_bytes_total"
	MetricCallDuration   = "ringtail_call_duration_seconds"
	MetricCallBusBW      = "ringtail_call_busbw_bytes_per_second"
	MetricPeerErrors     = "ringtail_peer_errors_total"
	MetricLinkTransport  = "ringtail_link_transport"
	MetricRankInfo       = "ringtail_rank_info"
	MetricStep           = "ringtail_step"
	MetricSteps          = "ringtail_steps_total"
	MetricStepMode       = "ringtail_step_mode"
	MetricStepArrival    = "ringtail_step_arrival_seconds"
	MetricStepPredicted  = "ringtail_step_predicted_arrival_seconds"
	MetricStepEvicted    = "ringtail_step_evicted"
	MetricEvictions      = "ringtail_evictions_total"
	MetricStepWaitUntil  = "ringtail_step_wait_until_seconds"
	MetricStepShare      = "ringtail_step_share_samples"
	MetricStepStaleness  = "ringtail_step_staleness_steps"
	MetricAppliedSamples = "ringtail_applied_samples_total"
	MetricLateSamples    = "ringtail_late_samples_total"
	MetricStepDuration   = "ringtail_step_duration_seconds"
	MetricHostCPU        = "ringtail_host_cpu_busy_ratio"
	MetricHostNetRx      = "ringtail_host_network_receive_bytes_per_second"
	MetricHostNetTx      = "ringtail_host_network_transmit_bytes_per_second"
	MetricGPUUtil        = "ringtail_gpu_utilization_ratio"
	MetricGPUMemUsed     = "ringtail_gpu_memory_used_bytes"
	MetricGPUMemTotal    = "ringtail_gpu_memory_total_bytes"
	MetricGPUPower       = "ringtail_gpu_power_watts"
	MetricGPUClock       = "ringtail_gpu_sm_clock_hertz"
	MetricTrainStep      = "ringtail_train_step"
	MetricTrainEpoch     = "ringtail_train_epoch"
	MetricTrainLoss      = "ringtail_train_loss"
	MetricTrainAccuracy  = "ringtail_train_accuracy_ratio"
	MetricTrainSamples   = "ringtail_train_samples_per_second"
)

// maxCollective bounds the per-collective arrays (wire.Collective values).
const maxCollective = 16

// collMetrics are one collective's series, resolved once so that a call
// records without a map lookup or an allocation.
type collMetrics struct {
	name     string
	count    callCounters
	duration prometheus.Histogram
	busbw    prometheus.Gauge
}

// callCounters are one collective's totals. They have one writer, the
// engine's call path (calls are serialised), so an update is a load and a
// store, not a locked read-modify-write; scrapes and the sampler read
// them concurrently.
type callCounters struct {
	calls      atomic.Uint64
	bytes      atomic.Uint64
	otherBytes atomic.Uint64 // of subgroup and pair calls
	otherBus   atomic.Uint64 // float64 bits: their bus bytes
	busFactor  float64       // the whole world's bus factor
}

// add counts a call of bytes among ranks (world: the whole world, the
// common case: two stores).
func (c *callCounters) add(col wire.Collective, bytes, ranks int, world bool) {
	c.calls.Store(c.calls.Load() + 1)
	c.bytes.Store(c.bytes.Load() + uint64(bytes))
	if !world {
		c.otherBytes.Store(c.otherBytes.Load() + uint64(bytes))
		c.otherBus.Store(math.Float64bits(math.Float64frombits(c.otherBus.Load()) + float64(bytes)*busFactor(col, ranks)))
	}
}

// bus returns the bus bytes counted.
func (c *callCounters) bus() float64 {
	other := c.otherBytes.Load() // before bytes: never more than its share of it
	return float64(c.bytes.Load()-other)*c.busFactor + math.Float64frombits(c.otherBus.Load())
}

// countersCollector exposes every collective's callCounters.
type countersCollector struct {
	m                 *metrics
	calls, bytes, bus *prometheus.Desc
}

func (cc *countersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.calls
	ch <- cc.bytes
	ch <- cc.bus
}

func (cc *countersCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range cc.m.coll {
		c := &cc.m.coll[i]
		if c.duration == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(cc.calls, prometheus.CounterValue, float64(c.count.calls.Load()), c.name)
		ch <- prometheus.MustNewConstMetric(cc.bytes, prometheus.CounterValue, float64(c.count.bytes.Load()), c.name)
		ch <- prometheus.MustNewConstMetric(cc.bus, prometheus.CounterValue, c.count.bus(), c.name)
	}
}

// metrics is one rank's registry and series.
type metrics struct {
	reg  *prometheus.Registry
	coll [maxCollective]collMetrics

	peerErrors *prometheus.CounterVec
	links      *prometheus.GaugeVec

	step         prometheus.Gauge
	steps        *prometheus.CounterVec
	mode         *prometheus.GaugeVec
	arrival      *prometheus.GaugeVec
	predicted    *prometheus.GaugeVec
	evicted      *prometheus.GaugeVec
	evictions    *prometheus.CounterVec
	waitUntil    prometheus.Gauge
	share        *prometheus.GaugeVec
	staleness    *prometheus.GaugeVec
	applied      prometheus.Counter
	late         prometheus.Counter
	stepDuration prometheus.Histogram

	hostCPU, hostRx, hostTx                              prometheus.Gauge
	gpuUtil, gpuMemUsed, gpuMemTotal, gpuPower, gpuClock *prometheus.GaugeVec

	// The training loop's progress (observe.Progress).
	trainStep, trainEpoch, trainLoss, trainAccuracy, trainThroughput prometheus.Gauge
}

// busFactor is nccl-tests' bus bandwidth factor: busbw = algbw × factor,
// the fraction of the data each rank's busiest link carries.
func busFactor(c wire.Collective, n int) float64 {
	if n <= 1 {
		return 0
	}
	switch c {
	case wire.AllReduce:
		return 2 * float64(n-1) / float64(n)
	case wire.AllGather, wire.ReduceScatter, wire.AllToAll:
		return float64(n-1) / float64(n)
	case wire.Broadcast, wire.PointToPoint, wire.Eager, wire.Probe:
		return 1
	}
	return 0
}

func newMetrics(rank, world int, host string) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &metrics{reg: reg}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	counters := &countersCollector{m: m,
		calls: prometheus.NewDesc(MetricCalls, "Collective calls completed or failed, by collective.", []string{"collective"}, nil),
		bytes: prometheus.NewDesc(MetricCallBytes, "Bytes of collective calls (nccl-tests size: the in-place buffer, AllGather's output, ReduceScatter's input).", []string{"collective"}, nil),
		bus:   prometheus.NewDesc(MetricCallBusBytes, "Bus bytes of collective calls (bytes × nccl-tests bus factor): busbw is the bus bytes per call over the mean call duration.", []string{"collective"}, nil)}
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricCallDuration,
		Help:    "Latency of collective calls: every call, or a uniform sample of about 2000 a second when calls are more frequent.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 14)}, []string{"collective"})
	bw := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricCallBusBW, Help: "Bus bandwidth of the last timed call of each collective (nccl-tests busbw)."}, []string{"collective"})
	f(counters)
	f(dur)
	f(bw)
	for c := wire.AllReduce; c.Valid() && int(c) < maxCollective; c++ {
		name := c.String()
		m.coll[c] = collMetrics{name: name, duration: dur.WithLabelValues(name).(prometheus.Histogram), busbw: bw.WithLabelValues(name)}
		m.coll[c].count.busFactor = busFactor(c, world)
	}
	m.peerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricPeerErrors, Help: "Failed calls by failure kind and blamed rank (peer=\"none\" when no rank is blamed)."}, []string{"kind", "peer"})
	m.links = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricLinkTransport, Help: "1 for the transport each link uses (shm+fastbox, shm, unix, tcp, libp2p)."}, []string{"peer", "channel", "transport"})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricRankInfo, Help: "1, labelled with this rank, the world size and the host."}, []string{"rank", "world", "host"})
	info.WithLabelValues(strconv.Itoa(rank), strconv.Itoa(world), host).Set(1)
	f(m.peerErrors)
	f(m.links)
	f(info)

	m.step = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricStep, Help: "The last training step recorded."})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricSteps, Help: "Training steps recorded, by the plan's mode."}, []string{"mode"})
	m.mode = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepMode, Help: "1 for the mode of the last step's plan (ring or evict), 0 for the others."}, []string{"mode"})
	m.arrival = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepArrival, Help: "Each rank's arrival at the last step's reduction, from its step start (late reports leave the previous value)."}, []string{"rank"})
	m.predicted = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepPredicted, Help: "Each rank's predicted arrival at the last step's reduction."}, []string{"rank"})
	m.evicted = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepEvicted, Help: "1 if the rank was evicted from the last step's ring."}, []string{"rank"})
	m.evictions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEvictions, Help: "Steps in which the rank was evicted."}, []string{"rank"})
	m.waitUntil = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricStepWaitUntil, Help: "t_w of the last step: how long after their step start parents wait for children (0: no wait)."})
	m.share = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepShare, Help: "Each rank's share of the last step's global batch, in samples."}, []string{"rank"})
	m.staleness = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStepStaleness, Help: "Staleness in steps of the gradient folded for each rank in the last step (0 on time, 1 a step late, -1 none)."}, []string{"rank"})
	m.applied = prometheus.NewCounter(prometheus.CounterOpts{Name: MetricAppliedSamples, Help: "Samples whose gradients were applied."})
	m.late = prometheus.NewCounter(prometheus.CounterOpts{Name: MetricLateSamples, Help: "Samples applied a step late."})
	m.stepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricStepDuration, Help: "This rank's step time, from step start to the end of the reduction.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)})
	for _, c := range []prometheus.Collector{m.step, m.steps, m.mode, m.arrival, m.predicted, m.evicted, m.evictions, m.waitUntil, m.share, m.staleness, m.applied, m.late, m.stepDuration} {
		f(c)
	}

	m.hostCPU = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHostCPU, Help: "Fraction of the host's CPU time not idle."})
	m.hostRx = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHostNetRx, Help: "Host network receive rate (all interfaces but lo)."})
	m.hostTx = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHostNetTx, Help: "Host network transmit rate (all interfaces but lo)."})
	gpu := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"gpu", "model"})
	}
	m.gpuUtil = gpu(MetricGPUUtil, "GPU utilisation (fraction of time a kernel ran), from NVML.")
	m.gpuMemUsed = gpu(MetricGPUMemUsed, "GPU memory allocated, from NVML.")
	m.gpuMemTotal = gpu(MetricGPUMemTotal, "GPU memory installed, from NVML.")
	m.gpuPower = gpu(MetricGPUPower, "GPU board power draw, from NVML.")
	m.gpuClock = gpu(MetricGPUClock, "GPU SM clock, from NVML.")
	for _, c := range []prometheus.Collector{m.hostCPU, m.hostRx, m.hostTx, m.gpuUtil, m.gpuMemUsed, m.gpuMemTotal, m.gpuPower, m.gpuClock} {
		f(c)
	}

	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		f(g)
		return g
	}
	m.trainStep = gauge(MetricTrainStep, "Optimizer steps done, as the training loop last reported its progress.")
	m.trainEpoch = gauge(MetricTrainEpoch, "Epochs done (fractional), as the training loop last reported.")
	m.trainLoss = gauge(MetricTrainLoss, "The training loss the loop last reported.")
	m.trainAccuracy = gauge(MetricTrainAccuracy, "The held-out accuracy the loop last reported, in [0, 1].")
	m.trainThroughput = gauge(MetricTrainSamples, "The job's training throughput the loop last reported (global samples a second).")
	return m
}

// collTotals reads one collective's totals (off the call path).
type collTotals struct {
	calls, bytes, busBytes float64
	timed, seconds         float64 // the histogram's count and sum
}

func (c *collMetrics) totals() collTotals {
	t := collTotals{calls: float64(c.count.calls.Load()), bytes: float64(c.count.bytes.Load()), busBytes: c.count.bus()}
	var d dto.Metric
	if c.duration.Write(&d) == nil {
		t.timed, t.seconds = float64(d.GetHistogram().GetSampleCount()), d.GetHistogram().GetSampleSum()
	}
	return t
}
