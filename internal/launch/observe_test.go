package launch

import (
	"fmt"
	"slices"
	"testing"
)

func TestObserveEnv(t *testing.T) {
	j := jobEnv{MetricsPort: 9400, Timeline: "/tmp/t.json"}
	got := observeEnv(j, placement{Rank: 3, LocalRank: 1})
	if want := []string{"RINGTAIL_METRICS_ADDR=127.0.0.1:9401", "RINGTAIL_TIMELINE=/tmp/t.json"}; !slices.Equal(got, want) {
		t.Errorf("local rank: %q, want %q", got, want)
	}
	got = observeEnv(j, placement{Rank: 3, LocalRank: 0, Remote: true, Host: "gpu2"})
	if got[0] != "RINGTAIL_METRICS_ADDR=0.0.0.0:9400" {
		t.Errorf("remote rank: %q", got)
	}
	if got := observeEnv(jobEnv{}, placement{}); len(got) != 0 {
		t.Errorf("off: %q", got)
	}
	addrs := MetricsAddrs(4, []HostSlots{{Host: "localhost", Slots: 2}, {Host: "gpu9.invalid", Slots: 2}}, 9400)
	if fmt.Sprint(addrs) != "[127.0.0.1:9400 127.0.0.1:9401 gpu9.invalid:9400 gpu9.invalid:9401]" {
		t.Errorf("addresses %v", addrs)
	}
	base, err := FreePortRange(4)
	if err != nil || base < 20000 {
		t.Fatalf("%d %v", base, err)
	}
}
