package launch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseHosts(t *testing.T) {
	tests := []struct {
		in   string
		want []HostSlots
	}{
		{"a:2,b:2", []HostSlots{{"a", 2}, {"b", 2}}},
		{"node1", []HostSlots{{"node1", 1}}},
		{" a:1 , b ", []HostSlots{{"a", 1}, {"b", 1}}},
		{"10.0.0.1:8,user@gpu-2.example.com:4", []HostSlots{{"10.0.0.1", 8}, {"user@gpu-2.example.com", 4}}},
		{"[fe80::1]:3,[::1]", []HostSlots{{"fe80::1", 3}, {"::1", 1}}},
	}
	for _, tc := range tests {
		got, err := ParseHosts(tc.in)
		if err != nil {
			t.Errorf("ParseHosts(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseHosts(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseHostsRejects(t *testing.T) {
	for in, want := range map[string]string{
		"":           "empty",
		"a:2,,b":     "empty entry",
		"a:0":        "positive integer",
		"a:x":        "positive integer",
		"a:":         "positive integer",
		"fe80::1:2":  "brackets",
		"[fe80::1":   "missing ']'",
		"[::1]x":     "expected ':slots'",
		"-oProxy=x":  "starts with '-'",
		"a;rm -rf /": "not allowed",
		":2":         "empty host name",
	} {
		_, err := ParseHosts(in)
		if err == nil || !errors.Is(err, ErrHostList) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHosts(%q) = %v, want an ErrHostList mentioning %q", in, err, want)
		}
	}
}

func TestHostSlotsStringRoundTrips(t *testing.T) {
	in := []HostSlots{{"a", 2}, {"fe80::1", 3}, {"user@b", 1}}
	parts := make([]string, len(in))
	for i, h := range in {
		parts[i] = h.String()
	}
	got, err := ParseHosts(strings.Join(parts, ","))
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip of %v: %v, %v", in, got, err)
	}
}

func TestParseHostfile(t *testing.T) {
	const file = `
# the GPU nodes
gpu1 slots=4
gpu2   slots=2  max_slots=8   # trailing comment
gpu3
gpu4:3
`
	got, err := ParseHostfile(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []HostSlots{{"gpu1", 4}, {"gpu2", 2}, {"gpu3", 1}, {"gpu4", 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if TotalSlots(got) != 10 {
		t.Fatalf("TotalSlots = %d, want 10", TotalSlots(got))
	}
}

func TestParseHostfileRejects(t *testing.T) {
	for in, want := range map[string]string{
		"# nothing\n\n":         "lists no host",
		"a slots=0\n":           "line 1",
		"a\nb slots=two\n":      "line 2",
		"a cpus=4\n":            `unexpected "cpus=4"`,
		"a slots=2\n-b slots=1": "line 2",
	} {
		_, err := ParseHostfile(strings.NewReader(in))
		if err == nil || !errors.Is(err, ErrHostList) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHostfile(%q) = %v, want an ErrHostList mentioning %q", in, err, want)
		}
	}
}

func TestPlaceAssignsConsecutiveRanksPerHost(t *testing.T) {
	isLocal := func(h string) bool { return h == "here" }
	got := place(5, []HostSlots{{"here", 2}, {"b", 3}}, isLocal)
	want := []placement{
		{Rank: 0, Host: "here", LocalRank: 0, LocalWorld: 2},
		{Rank: 1, Host: "here", LocalRank: 1, LocalWorld: 2},
		{Rank: 2, Host: "b", LocalRank: 0, LocalWorld: 3, Remote: true},
		{Rank: 3, Host: "b", LocalRank: 1, LocalWorld: 3, Remote: true},
		{Rank: 4, Host: "b", LocalRank: 2, LocalWorld: 3, Remote: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("place = %+v\nwant %+v", got, want)
	}
	local := place(3, nil, isLoopback)
	for i, p := range local {
		if p.Rank != i || p.LocalRank != i || p.LocalWorld != 3 || p.Remote {
			t.Fatalf("local placement %d = %+v", i, p)
		}
	}
}
