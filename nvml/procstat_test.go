package nvml

import (
	"errors"
	"math"
	"os"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseProcStat_ReadsAggregateLineOnly(t *testing.T) {
	got, err := ParseProcStat(readFixture(t, "proc_stat_t0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := CPUTimes{User: 10000, Nice: 200, System: 3000, Idle: 80000, IOWait: 500, IRQ: 100, SoftIRQ: 200, Steal: 0}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseProcStat_OldKernelWithFourColumns(t *testing.T) {
	got, err := ParseProcStat([]byte("cpu 1 2 3 4\ncpu0 1 2 3 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseProcStat_RejectsMalformedText(t *testing.T) {
	for name, text := range map[string]string{
		"empty":         "",
		"per-cpu only":  "cpu0 1 2 3 4\n",
		"three columns": "cpu 1 2 3\n",
		"not a number":  "cpu 1 2 x 4\n",
		"negative":      "cpu 1 2 -3 4\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseProcStat([]byte(text)); !errors.Is(err, ErrParse) {
				t.Fatalf("err = %v, want ErrParse", err)
			}
		})
	}
}

// Between the two fixtures: user +600, system +300, softirq +50 are busy;
// idle +900 is idle; irq went backwards and counts as nothing; guest +400
// is already inside user and must not be counted again.
func TestCPUBusy_BetweenFixtures(t *testing.T) {
	t0, err := ParseProcStat(readFixture(t, "proc_stat_t0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t1, err := ParseProcStat(readFixture(t, "proc_stat_t1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := CPUBusy(t0, t1)
	want := 950.0 / 1850.0
	if math.Abs(got-want) > 1e-12 {
		t.Fatalf("CPUBusy = %v, want %v", got, want)
	}
}

func TestCPUBusy_EdgeCases(t *testing.T) {
	idle := CPUTimes{Idle: 100}
	if got := CPUBusy(idle, idle); got != 0 {
		t.Errorf("no elapsed time: got %v, want 0", got)
	}
	if got := CPUBusy(idle, CPUTimes{Idle: 200}); got != 0 {
		t.Errorf("all idle: got %v, want 0", got)
	}
	if got := CPUBusy(idle, CPUTimes{Idle: 100, User: 50, Steal: 50}); got != 1 {
		t.Errorf("all busy (steal counts as busy): got %v, want 1", got)
	}
	if got := CPUBusy(CPUTimes{Idle: 100, IOWait: 50}, CPUTimes{Idle: 200, IOWait: 10, User: 100}); got != 0.5 {
		t.Errorf("iowait going backwards: got %v, want 0.5", got)
	}
}
