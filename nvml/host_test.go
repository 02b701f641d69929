package nvml

import (
	"errors"
	"io/fs"
	"math"
	"testing"
	"testing/fstest"
	"time"
)

// manualClock is a clock the test moves by hand.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time { return c.now }

func fixtureFS(t *testing.T, stat, dev string) fstest.MapFS {
	return fstest.MapFS{
		"stat":    {Data: readFixture(t, stat)},
		"net/dev": {Data: readFixture(t, dev)},
	}
}

func TestHostReader_FirstReadIsBaselineThenRatesOverInterval(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	proc := fixtureFS(t, "proc_stat_t0.txt", "net_dev_t0.txt")
	r, err := NewHostReader(HostConfig{Now: clock.Now, Proc: proc, Interfaces: []string{"eth0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, ErrNoBaseline) {
		t.Fatalf("first read: err = %v, want ErrNoBaseline", err)
	}

	clock.now = clock.now.Add(2 * time.Second)
	proc["stat"] = &fstest.MapFile{Data: readFixture(t, "proc_stat_t1.txt")}
	proc["net/dev"] = &fstest.MapFile{Data: readFixture(t, "net_dev_t1.txt")}
	s, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if s.Interval != 2*time.Second || !s.At.Equal(time.Unix(1002, 0)) {
		t.Errorf("interval %v at %v, want 2s at 1002", s.Interval, s.At)
	}
	if math.Abs(s.CPUBusy-950.0/1850.0) > 1e-12 {
		t.Errorf("CPUBusy = %v", s.CPUBusy)
	}
	if s.NetRxBytesPerSec != 125e6 || s.NetTxBytesPerSec != 250e6 {
		t.Errorf("net rx=%v tx=%v, want 125e6 250e6", s.NetRxBytesPerSec, s.NetTxBytesPerSec)
	}

	// Same files, clock advanced: nothing happened, zero activity.
	clock.now = clock.now.Add(time.Second)
	s, err = r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUBusy != 0 || s.NetRxBytesPerSec != 0 || s.NetTxBytesPerSec != 0 || s.Interval != time.Second {
		t.Errorf("idle interval: got %+v", s)
	}
}

func TestHostReader_ClockNotAdvancingRestartsBaseline(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	r, err := NewHostReader(HostConfig{Now: clock.Now, Proc: fixtureFS(t, "proc_stat_t0.txt", "net_dev_t0.txt")})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = r.Read()
	if _, err := r.Read(); !errors.Is(err, ErrNoBaseline) {
		t.Fatalf("same instant: err = %v, want ErrNoBaseline", err)
	}
	clock.now = clock.now.Add(-time.Second)
	if _, err := r.Read(); !errors.Is(err, ErrNoBaseline) {
		t.Fatalf("clock went back: err = %v, want ErrNoBaseline", err)
	}
	clock.now = clock.now.Add(time.Second)
	if _, err := r.Read(); err != nil {
		t.Fatalf("after re-baseline: %v", err)
	}
}

func TestHostReader_MissingOrGarbledFilesAreErrors(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	r, err := NewHostReader(HostConfig{Now: clock.Now, Proc: fstest.MapFS{"stat": {Data: []byte("cpu 1 2 3 4\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing net/dev: err = %v, want fs.ErrNotExist", err)
	}
	r, err = NewHostReader(HostConfig{Now: clock.Now, Proc: fstest.MapFS{
		"stat":    {Data: []byte("garbage\n")},
		"net/dev": {Data: []byte("")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, ErrParse) {
		t.Fatalf("garbled stat: err = %v, want ErrParse", err)
	}
}

func TestHostConfig_Validate(t *testing.T) {
	good := HostConfig{Now: time.Now, Proc: fstest.MapFS{}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultHostConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]HostConfig{
		"nil clock":       {Proc: fstest.MapFS{}},
		"nil proc":        {Now: time.Now},
		"empty interface": {Now: time.Now, Proc: fstest.MapFS{}, Interfaces: []string{""}},
	} {
		if _, err := NewHostReader(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}
