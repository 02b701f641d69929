package nvml

import (
	"errors"
	"testing"
	"time"
)

func TestParseNetDev_SortsInterfacesAndPicksByteAndPacketColumns(t *testing.T) {
	got, err := ParseNetDev(readFixture(t, "net_dev_t0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []NetCounters{
		{Name: "docker0", RxBytes: 700000, RxPackets: 7000, TxBytes: 900000, TxPackets: 9000},
		{Name: "eth0", RxBytes: 1000000000, RxPackets: 800000, TxBytes: 2000000000, TxPackets: 900000},
		{Name: "lo", RxBytes: 5000000, RxPackets: 50000, TxBytes: 5000000, TxPackets: 50000},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d interfaces, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("interface %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseNetDev_NoSpaceAfterColon(t *testing.T) {
	got, err := ParseNetDev([]byte("eth1:10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (NetCounters{Name: "eth1", RxBytes: 10, RxPackets: 1, TxBytes: 20, TxPackets: 2}) {
		t.Fatalf("got %+v", got)
	}
}

func TestParseNetDev_RejectsShortOrNonNumericLines(t *testing.T) {
	for name, text := range map[string]string{
		"short":       "eth0: 1 2 3\n",
		"non-numeric": "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n",
		"no name":     ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseNetDev([]byte(text)); !errors.Is(err, ErrParse) {
				t.Fatalf("err = %v, want ErrParse", err)
			}
		})
	}
}

// Two seconds between the fixtures: eth0 received 250 MB and sent 500 MB;
// docker0 was re-created (counters went backwards) and ib0 appeared, so
// neither counts; lo is excluded unless named.
func TestNetRates_BetweenFixtures(t *testing.T) {
	t0, err := ParseNetDev(readFixture(t, "net_dev_t0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t1, err := ParseNetDev(readFixture(t, "net_dev_t1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		only   []string
		rx, tx float64
	}{
		{"default excludes lo", nil, 125e6, 250e6},
		{"only lo", []string{"lo"}, 2e6, 2e6},
		{"eth0 and lo", []string{"eth0", "lo"}, 127e6, 252e6},
		{"unknown interface", []string{"wlan0"}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rx, tx := NetRates(t0, t1, 2*time.Second, c.only)
			if rx != c.rx || tx != c.tx {
				t.Fatalf("got rx=%v tx=%v, want rx=%v tx=%v", rx, tx, c.rx, c.tx)
			}
		})
	}
	if rx, tx := NetRates(t0, t1, 0, nil); rx != 0 || tx != 0 {
		t.Fatalf("zero interval: got %v %v, want 0 0", rx, tx)
	}
}
