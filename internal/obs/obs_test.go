package obs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/nvml"
	"github.com/ringtail-ml/ringtail/observe"
)

// fakeProc is a /proc with one CPU line and one interface, for the host
// sampler.
func fakeProc() nvml.HostConfig {
	fsys := fstest.MapFS{
		"stat":    {Data: []byte("cpu  100 0 100 800 0 0 0 0 0 0\n")},
		"net/dev": {Data: []byte("Inter-|\n face |\n  eth0: 1000 1 0 0 0 0 0 0 2000 2 0 0 0 0 0 0\n")},
	}
	return nvml.HostConfig{Now: time.Now, Proc: fsys}
}

func newTestRecorder(t *testing.T, rank, world int, timeline string) *Recorder {
	t.Helper()
	r, err := New(Config{Rank: rank, World: world, Host: "testhost", MetricsAddr: "127.0.0.1:0", Timeline: timeline,
		Period: 20 * time.Millisecond, HostProc: fakeProc(),
		GPU: nvml.NewFake(nvml.Sample{Name: "NVIDIA H100 80GB HBM3", Model: "H100", GPUUtilPercent: 87, MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 10 << 30, PowerMilliwatts: 350000, SMClockMHz: 1980})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// call records one call through the Tracer methods, as the engine and
// executor make them.
func call(r *Recorder, coll wire.Collective, group uint32, n uint64, bytes, ranks int, err error) {
	r.Begin(exec.CallInfo{Desc: transport.Desc{Collective: coll, Group: group, Call: n}, Algorithm: "ring", Bytes: bytes, Ranks: ranks})
	r.Phase(plan.PhaseReduceScatter)
	r.Arrived()
	r.Phase(plan.PhaseAllGather)
	r.End(err)
}

// stepEvent is a synthetic step of 4 ranks with rank 2 evicted to parent 1.
func stepEvent(step int, t0 time.Time) observe.StepEvent {
	ms := time.Millisecond
	p := observe.Plan{Step: step, Mode: "evict", Members: []int{0, 1, 3}, Evicted: []int{2}, Parents: []observe.Parent{{Child: 2, Parent: 1}},
		WaitUntil: 150 * ms, Shares: []int{20, 20, 4, 20}, Predicted: []time.Duration{100 * ms, 100 * ms, 290 * ms, 100 * ms},
		PerSample: []time.Duration{5 * ms, 5 * ms, 15 * ms, 5 * ms}, Stragglers: []int{2}}
	next := p
	next.Step = step + 1
	return observe.StepEvent{Step: step, Rank: 1, Role: "parent", Plan: p, Next: next,
		Arrivals:  []time.Duration{101 * ms, 99 * ms, -1, 102 * ms},
		Computes:  []time.Duration{100 * ms, 98 * ms, -1, 100 * ms},
		Staleness: []int{0, 0, 1, 0}, Applied: 64, Late: 4, Carried: 1,
		Began: t0, Arrived: t0.Add(99 * ms), Ended: t0.Add(160 * ms), Compute: 98 * ms, ChildWait: 51 * ms}
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want ("k=v" pairs), or fails.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

func TestRecorderServesTheMetrics(t *testing.T) {
	r := newTestRecorder(t, 1, 4, "")
	r.SetLinks([]LinkInfo{{Peer: 0, Channel: 0, Transport: "shm+fastbox"}, {Peer: 2, Channel: 0, Transport: "tcp"}})
	for i := range 3 {
		call(r, wire.AllReduce, wire.World, uint64(i+1), 1<<20, 4, nil)
	}
	call(r, wire.AllGather, wire.World, 4, 4096, 4, nil)
	call(r, wire.AllReduce, wire.World, 5, 1<<20, 4, &transport.Error{Kind: transport.KindPeerDied, Rank: 2})
	call(r, wire.Barrier, wire.World, 6, 0, 4, context.Canceled)
	r.RecordStep(stepEvent(7, time.Now()))

	fams := scrape(t, r.Addr())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{MetricCalls, []string{"collective=AllReduce"}, 4},
		{MetricCalls, []string{"collective=AllGather"}, 1},
		{MetricCallBytes, []string{"collective=AllReduce"}, 4 << 20},
		{MetricCallBusBytes, []string{"collective=AllReduce"}, 4 << 20 * 1.5},
		{MetricPeerErrors, []string{"kind=peer_died", "peer=2"}, 1},
		{MetricPeerErrors, []string{"kind=canceled", "peer=none"}, 1},
		{MetricLinkTransport, []string{"peer=0", "transport=shm+fastbox"}, 1},
		{MetricLinkTransport, []string{"peer=2", "transport=tcp"}, 1},
		{MetricRankInfo, []string{"rank=1", "world=4", "host=testhost"}, 1},
		{MetricStep, nil, 7},
		{MetricSteps, []string{"mode=evict"}, 1},
		{MetricStepMode, []string{"mode=evict"}, 1},
		{MetricStepMode, []string{"mode=ring"}, 0},
		{MetricStepArrival, []string{"rank=3"}, 0.102},
		{MetricStepPredicted, []string{"rank=2"}, 0.29},
		{MetricStepEvicted, []string{"rank=2"}, 1},
		{MetricStepEvicted, []string{"rank=0"}, 0},
		{MetricEvictions, []string{"rank=2"}, 1},
		{MetricStepWaitUntil, nil, 0.15},
		{MetricStepShare, []string{"rank=2"}, 4},
		{MetricStepStaleness, []string{"rank=2"}, 1},
		{MetricAppliedSamples, nil, 64},
		{MetricLateSamples, nil, 4},
		{MetricStepDuration, nil, 1},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Back-to-back calls are sampled once they come fast: the first is
	// always timed.
	if n := value(t, fams, MetricCallDuration, "collective=AllReduce"); n < 1 || n > 4 {
		t.Errorf("%v AllReduce calls timed of 4", n)
	}
	if bw := value(t, fams, MetricCallBusBW, "collective=AllReduce"); !(bw > 0) {
		t.Errorf("busbw %v, want > 0", bw)
	}
	if _, ok := fams[MetricStepArrival]; ok {
		// Rank 2's report was late: its arrival is not set.
		for _, m := range fams[MetricStepArrival].Metric {
			if m.Label[0].GetValue() == "2" {
				t.Errorf("rank 2's late arrival was recorded as %v", m.Gauge.GetValue())
			}
		}
	}
}

func TestFrequentCallsAreSampledAndCountedExactly(t *testing.T) {
	r := newTestRecorder(t, 0, 2, "")
	const calls = 200000
	for i := range calls {
		call(r, wire.AllReduce, wire.World, uint64(i+1), 8, 2, nil)
	}
	fams := scrape(t, r.Addr())
	if n := value(t, fams, MetricCalls, "collective=AllReduce"); n != calls {
		t.Errorf("%v calls counted, want %d", n, calls)
	}
	if n := value(t, fams, MetricCallBytes, "collective=AllReduce"); n != 8*calls {
		t.Errorf("%v bytes counted, want %d", n, 8*calls)
	}
	// However fast this machine runs them, far fewer than all are timed.
	if n := value(t, fams, MetricCallDuration, "collective=AllReduce"); n < 1 || n > calls/4 {
		t.Errorf("%v of %d back-to-back calls timed", n, calls)
	}
}

// readEvents reads SSE messages from url until stop returns true for one.
func readEvents(t *testing.T, url string, stop func(kind string, msg map[string]any) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("message %q: %v", data, err)
		}
		if stop(m["kind"].(string), m) {
			return
		}
	}
	t.Fatalf("stream ended before the expected message: %v", sc.Err())
}

func TestRecorderStreamsStepsStatsAndTelemetry(t *testing.T) {
	r := newTestRecorder(t, 1, 4, "")
	r.RecordStep(stepEvent(3, time.Now()))
	call(r, wire.AllReduce, wire.World, 1, 1<<20, 4, nil)
	var sawInfo, sawStep bool
	readEvents(t, "http://"+r.Addr()+"/events", func(kind string, m map[string]any) bool {
		switch kind {
		case "info":
			sawInfo = m["host"] == "testhost" && m["world"] == 4.0
		case "step":
			plan := m["plan"].(map[string]any)
			sawStep = m["step"] == 3.0 && plan["mode"] == "evict" && fmt.Sprint(plan["evicted"]) == "[2]" &&
				fmt.Sprint(m["arrivals_ms"]) == "[101 99 -1 102]" && plan["wait_until_ms"] == 150.0
		case "stats":
			// The first window with the call, and telemetry (the host's
			// baseline needs one window first).
			_, hasAR := m["collectives"].(map[string]any)["AllReduce"]
			gpus, _ := m["gpus"].([]any)
			if hasAR && len(gpus) == 1 {
				g := gpus[0].(map[string]any)
				if g["util"] != 0.87 || g["name"] != "NVIDIA H100 80GB HBM3" {
					t.Errorf("gpu %v", g)
				}
				return true
			}
		}
		return false
	})
	if !sawInfo || !sawStep {
		t.Fatalf("info %v step %v", sawInfo, sawStep)
	}
	fams := scrape(t, r.Addr())
	if v := value(t, fams, MetricGPUUtil, "gpu=0", "model=H100"); v != 0.87 {
		t.Errorf("gpu utilisation %v", v)
	}
}

// readTrace reads and validates a trace file.
func readTrace(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := ReadTrace(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := ValidateTrace(evs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return evs
}

func names(evs []map[string]any) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		out[e["ph"].(string)+" "+e["name"].(string)]++
	}
	return out
}

func TestTimelineIsATraceWithPhasesStepsAndDecisions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	r := newTestRecorder(t, 1, 4, path)
	t0 := time.Now()
	call(r, wire.AllReduce, wire.World, 1, 1<<20, 4, nil)
	call(r, wire.Broadcast, wire.World, 2, 64, 4, errors.New("a \"quoted\"\nfailure"))
	r.RecordStep(stepEvent(5, t0))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !json.Valid(data) {
		t.Fatalf("closed timeline is not valid JSON:\n%s", data)
	}
	evs := readTrace(t, path)
	got := names(evs)
	for _, want := range []string{"M process_name", "M thread_name", "X AllReduce", "X Broadcast", "X wait for peers", "X reduce-scatter",
		"X allgather", "X step 5", "X compute", "X wait for children", "i plan step 6: evict [2], t_w=150ms"} {
		if got[want] == 0 {
			t.Errorf("no %q event; have %v", want, got)
		}
	}
	for _, e := range evs {
		if e["name"] == "Broadcast" && e["args"].(map[string]any)["error"] != "a \"quoted\"\nfailure" {
			t.Errorf("error arg %v", e["args"])
		}
		if e["name"] == "process_name" {
			if b, _ := num(e["args"].(map[string]any)["clock_base_unix_ns"]); b <= 0 {
				t.Errorf("no clock base in %v", e)
			}
		}
	}
}

func TestTimelineOfAKilledRankStillReads(t *testing.T) {
	evs, err := ReadTrace([]byte("[\n{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":0,\"tid\":1},\n{\"name\":\"b\",\"ph\":\"X\",\"ts\":1.5,\"dur\":1,\"pid\":0,\"tid\":1},\n"))
	if err != nil || len(evs) != 2 {
		t.Fatalf("%v %v", evs, err)
	}
	if err := ValidateTrace(evs); err != nil {
		t.Fatal(err)
	}
}

func TestValidateTraceCatchesBadEvents(t *testing.T) {
	for name, ev := range map[string]string{
		"no phase":    `[{"name":"a","ts":1,"pid":0,"tid":0}]`,
		"negative":    `[{"name":"a","ph":"X","ts":1,"dur":-1,"pid":0,"tid":0}]`,
		"scope":       `[{"name":"a","ph":"i","ts":1,"s":"x","pid":0,"tid":0}]`,
		"meta":        `[{"name":"bogus","ph":"M","pid":0,"tid":0,"args":{}}]`,
		"no pid":      `[{"name":"a","ph":"X","ts":1,"dur":1,"tid":0}]`,
		"not nesting": `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":0,"tid":0},{"name":"b","ph":"X","ts":5,"dur":10,"pid":0,"tid":0}]`,
	} {
		evs, err := ReadTrace([]byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		if ValidateTrace(evs) == nil {
			t.Errorf("%s: %s passed", name, ev)
		}
	}
}

// writeRank writes a synthetic rank timeline whose clock base is off by
// skew: its calls end when the reference's do.
func writeRank(t *testing.T, dir string, rank int, base time.Time, skew time.Duration, ends []float64, host ...string) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("r%d.json", rank))
	var b strings.Builder
	h := ""
	if len(host) > 0 {
		h = fmt.Sprintf(`,"host":%q`, host[0])
	}
	fmt.Fprintf(&b, `[{"name":"process_name","ph":"M","pid":%d,"tid":0,"args":{"name":"rank %d","clock_base_unix_ns":%d%s}}`, rank, rank, base.Add(skew).UnixNano(), h)
	for i, end := range ends {
		// ts relative to this rank's (skewed) base: the event truly ends
		// at end µs after the true base.
		ts := end - 50 - float64(skew)/1e3
		fmt.Fprintf(&b, ",\n"+`{"name":"AllReduce","cat":"collective","ph":"X","ts":%.3f,"dur":50,"pid":%d,"tid":1,"args":{"group":0,"call":%d}}`, ts, rank, i+1)
	}
	b.WriteString("]")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMergeAlignsClocksOnSharedCalls(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	ends := []float64{1000, 2000, 3000, 4000, 5000}
	// Rank 1's wall clock is 7 ms ahead, rank 2's 3 ms behind; each call
	// ends within a few µs on every rank (the noise).
	p0 := writeRank(t, dir, 0, base, 0, ends)
	p1 := writeRank(t, dir, 1, base, 7*time.Millisecond, []float64{1002, 2001, 3003, 4002, 5001})
	p2 := writeRank(t, dir, 2, base, -3*time.Millisecond, []float64{999, 1998, 3000, 4001, 4999})
	rep, events := mergeValid(t, []string{p2, p0, p1})
	if fmt.Sprint(rep.Ranks) != "[0 1 2]" || rep.Matched["1"] != 5 || rep.Matched["2"] != 5 {
		t.Fatalf("report %+v", rep)
	}
	// After alignment each call ends within the noise on every rank.
	end := map[[2]float64]float64{}
	for _, e := range events {
		if e["ph"] != "X" {
			continue
		}
		c, _ := num(e["args"].(map[string]any)["call"])
		ts, _ := num(e["ts"])
		dur, _ := num(e["dur"])
		pid, _ := num(e["pid"])
		end[[2]float64{pid, c}] = ts + dur
	}
	for c := 1.0; c <= 5; c++ {
		for r := 1.0; r <= 2; r++ {
			if d := end[[2]float64{r, c}] - end[[2]float64{0, c}]; d < -3 || d > 3 {
				t.Errorf("call %v: rank %v ends %.3f µs from rank 0", c, r, d)
			}
		}
	}
}

func TestMergeTrustsTheClockOfOneHost(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	// Rank 1 leaves every call 40 µs after rank 0 (its place in the ring),
	// on the same host: the shared wall clock stands, no correction.
	p0 := writeRank(t, dir, 0, base, 0, []float64{1000, 2000, 3000}, "h")
	p1 := writeRank(t, dir, 1, base, 0, []float64{1040, 2040, 3040}, "h")
	// Rank 2 is on another host whose clock is 5 ms ahead.
	p2 := writeRank(t, dir, 2, base, 5*time.Millisecond, []float64{1020, 2020, 3020}, "other")
	rep, err := Merge(io.Discard, []string{p0, p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OffsetsUs["1"] != 0 || rep.Matched["1"] != 0 {
		t.Errorf("rank 1 on rank 0's host was corrected: %+v", rep)
	}
	// Host "other" against host "h": call ends differ by −20 and +20 µs
	// (median 0): only the 5 ms of wall clock is taken out.
	if off := rep.OffsetsUs["2"]; off < -1 || off > 1 || rep.Matched["2"] != 6 {
		t.Errorf("rank 2: offset %v µs from %d ends, want ≈ 0 from 6", off, rep.Matched["2"])
	}
}

func TestMergeRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	a := writeRank(t, dir, 0, base, 0, []float64{100})
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	for name, files := range map[string][]string{"none": nil, "duplicate rank": {a, a}, "not json": {a, bad}, "missing": {filepath.Join(dir, "nope.json")}} {
		if _, err := Merge(io.Discard, files); err == nil {
			t.Errorf("%s: merged", name)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := RankTimelinePath("/tmp/trace.json", 2, 4); got != "/tmp/trace.rank2.json" {
		t.Error(got)
	}
	if got := RankTimelinePath("/tmp/trace.json", 0, 1); got != "/tmp/trace.json" {
		t.Error(got)
	}
	if got, err := RankMetricsAddr("0.0.0.0:9400+", 3); err != nil || got != "0.0.0.0:9403" {
		t.Error(got, err)
	}
	if got, err := RankMetricsAddr("127.0.0.1:0", 3); err != nil || got != "127.0.0.1:0" {
		t.Error(got, err)
	}
	if _, err := RankMetricsAddr("h:65535+", 1); err == nil {
		t.Error("port overflow accepted")
	}
	got, err := ExpandTargets("127.0.0.1:9400-9402, host:80")
	if err != nil || fmt.Sprint(got) != "[127.0.0.1:9400 127.0.0.1:9401 127.0.0.1:9402 host:80]" {
		t.Error(got, err)
	}
	for _, bad := range []string{"", "nohost", "h:9-1", "h:x", "h:70000"} {
		if _, err := ExpandTargets(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	for name, c := range map[string]Config{
		"rank":    {Rank: 4, World: 4},
		"addr":    {Rank: 0, World: 1, MetricsAddr: "nope"},
		"port":    {Rank: 0, World: 1, MetricsAddr: "h:99999"},
		"period":  {Rank: 0, World: 1, Period: -1},
		"history": {Rank: 0, World: 1, History: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, c := range map[string]DashboardConfig{
		"listen":  {Listen: "x", Targets: []string{"h:1"}},
		"targets": {Listen: "127.0.0.1:0"},
		"target":  {Listen: "127.0.0.1:0", Targets: []string{"h"}},
	} {
		if _, err := NewDashboard(c); err == nil {
			t.Errorf("dashboard %s: accepted", name)
		}
	}
	if _, err := New(Config{Rank: 0, World: 1, Timeline: filepath.Join(t.TempDir(), "no", "such", "dir.json")}); err == nil {
		t.Error("timeline in a missing directory accepted")
	}
}

func TestDashboardRelaysTheRanksAndServesThePage(t *testing.T) {
	r0 := newTestRecorder(t, 0, 2, "")
	r1 := newTestRecorder(t, 1, 2, "")
	d, err := NewDashboard(DashboardConfig{Listen: "127.0.0.1:0", Targets: []string{r0.Addr(), r1.Addr()}, Title: "test job"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, page := range []struct{ path, want string }{{"/", "app.js"}, {"/app.js", "EventSource"}, {"/style.css", "--bad"}} {
		resp, err := http.Get(d.URL() + strings.TrimPrefix(page.path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), page.want) {
			t.Errorf("%s: %s, lacks %q", page.path, resp.Status, page.want)
		}
	}
	ev := stepEvent(9, time.Now())
	ev.Rank = 0
	r0.RecordStep(ev)
	ev.Rank = 1
	r1.RecordStep(ev)
	seen := map[string]bool{}
	readEvents(t, d.URL()+"api/events", func(kind string, m map[string]any) bool {
		switch kind {
		case "job":
			seen["job"] = m["title"] == "test job"
		case "info":
			seen[fmt.Sprint("info", m["rank"])] = true
		case "step":
			seen[fmt.Sprint("step", m["rank"])] = m["step"] == 9.0
		}
		return seen["job"] && seen["info0"] && seen["info1"] && seen["step0"] && seen["step1"]
	})
}
