package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// hostListCases are inputs with the expansion `scontrol show hostnames`
// (Slurm 22.05) prints for them; the Slurm integration test checks the
// same table against the real scontrol.
var hostListCases = []struct {
	in   string
	want []string
}{
	{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
	{"a[1-2]b[3-4]", []string{"a1b3", "a1b4", "a2b3", "a2b4"}},
	{"node[8-12]", []string{"node8", "node9", "node10", "node11", "node12"}},
	{"n[09-11]", []string{"n09", "n10", "n11"}},
	{"n[1-3,2]", []string{"n1", "n2", "n3", "n2"}},
	{"rack[0-1]-node[00-01]", []string{"rack0-node00", "rack0-node01", "rack1-node00", "rack1-node01"}},
	{"n[01-2]", []string{"n01", "n02"}},
	{"n[1-02]", []string{"n1", "n2"}},
	{",a", []string{"a"}},
	{"a,,b", []string{"a", "b"}},
	{"a b", []string{"a", "b"}},
	{"n[000-010]", []string{"n000", "n001", "n002", "n003", "n004", "n005", "n006", "n007", "n008", "n009", "n010"}},
	{"n[7,5]", []string{"n7", "n5"}},
	{"y[3],x", []string{"y3", "x"}},
	{"a[1-2],b[3-4]", []string{"a1", "a2", "b3", "b4"}},
	{"n[1-2]x[1]", []string{"n1x1", "n2x1"}},
	{"vm", []string{"vm"}},
	{"n[007]", []string{"n007"}},
	{"n[0-10]", []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}},
	{"10.0.0.[1-3]", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
}

func TestExpandHostList(t *testing.T) {
	for _, tc := range hostListCases {
		got, err := ExpandHostList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ExpandHostList(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// Beyond Slurm: text after the last bracket.
	for in, want := range map[string][]string{
		"n[1-2]-ib,x":                    {"n1-ib", "n2-ib", "x"},
		"gpu-a100-[1-2].cluster.example": {"gpu-a100-1.cluster.example", "gpu-a100-2.cluster.example"},
	} {
		if got, err := ExpandHostList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ExpandHostList(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestExpandHostListRejects(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "names no host",
		" , ":                       "names no host",
		"n[3-1]":                    "descends",
		"n[]":                       "empty brackets",
		"n[a-b]":                    "not a number",
		"n[1-]":                     "not a number",
		"n[-1]":                     "not a number",
		"n[1,,2]":                   "not a number",
		"n[+1]":                     "not a number",
		"n[1-2":                     "missing ']'",
		"n1]":                       "without '['",
		"n[[1]]":                    "nested",
		"n[0-99999999999]":          "more than 65536 hosts",
		"a[0-999]b[0-999]":          "more than 65536 hosts",
		"n[0-18446744073709551616]": "not a number",
	} {
		got, err := ExpandHostList(in)
		if err == nil || !errors.Is(err, ErrHostList) || !strings.Contains(err.Error(), want) {
			t.Errorf("ExpandHostList(%q) = %q, %v; want an ErrHostList mentioning %q", in, got, err, want)
		}
	}
	// The bound counts the whole list, not one item.
	items := make([]string, 0, 3)
	for i := range 3 {
		items = append(items, fmt.Sprintf("g%d[0-29999]", i))
	}
	if _, err := ExpandHostList(strings.Join(items, ",")); err == nil {
		t.Error("90000 hosts in three items were accepted")
	}
	if got, err := ExpandHostList("n[0-65535]"); err != nil || len(got) != MaxHosts {
		t.Errorf("exactly MaxHosts: %d hosts, %v", len(got), err)
	}
}

func TestExpandTasksPerNode(t *testing.T) {
	for in, want := range map[string][]int{
		"4":             {4},
		"2(x3),1":       {2, 2, 2, 1},
		"1(x2)":         {1, 1},
		"3,2":           {3, 2},
		" 8(x2) , 4 ":   {8, 8, 4},
		"1,2(x1),3(x2)": {1, 2, 3, 3},
	} {
		if got, err := ExpandTasksPerNode(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ExpandTasksPerNode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":          "empty",
		"0":         "not in 1..",
		"2(x0)":     "at least 1",
		"2(3)":      "not N or N(xR)",
		"2(x3":      "not N or N(xR)",
		"x":         "not N or N(xR)",
		"-1":        "not N or N(xR)",
		"1,,2":      "not N or N(xR)",
		"1(x70000)": "more than 65536 nodes",
	} {
		got, err := ExpandTasksPerNode(in)
		if err == nil || !errors.Is(err, ErrTasksPerNode) || !strings.Contains(err.Error(), want) {
			t.Errorf("ExpandTasksPerNode(%q) = %v, %v; want an ErrTasksPerNode mentioning %q", in, got, err, want)
		}
	}
}

// FuzzExpandHostList checks that any input either fails cleanly or
// expands into at most MaxHosts plain names.
func FuzzExpandHostList(f *testing.F) {
	for _, tc := range hostListCases {
		f.Add(tc.in)
	}
	f.Add("n[1-2")
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ExpandHostList(s)
		if err != nil {
			if !errors.Is(err, ErrHostList) || hosts != nil {
				t.Fatalf("error %v does not wrap ErrHostList, or hosts %q returned with it", err, hosts)
			}
			return
		}
		if len(hosts) == 0 || len(hosts) > MaxHosts {
			t.Fatalf("%d hosts", len(hosts))
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "[], \t\n") {
				t.Fatalf("host %q from %q", h, s)
			}
		}
	})
}
