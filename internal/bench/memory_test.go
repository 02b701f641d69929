package bench

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ringtail-ml/ringtail"
)

const meminfo24G = "MemTotal:       25000000 kB\nMemFree:         1000000 kB\nMemAvailable:   24000000 kB\n"

// A cgroup v2 limit, set on the process's cgroup's parent (as systemd-run
// -p MemoryMax does on a slice), is tighter than MemAvailable: it bounds
// the ranks.
func TestReadMemoryCgroupV2(t *testing.T) {
	root := fstest.MapFS{
		"proc/meminfo":        {Data: []byte(meminfo24G)},
		"proc/self/cgroup":    {Data: []byte("0::/user.slice/job.scope\n")},
		"proc/self/mountinfo": {Data: []byte("30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/user.slice/job.scope/memory.max":     {Data: []byte("max\n")},
		"sys/fs/cgroup/user.slice/job.scope/memory.current": {Data: []byte("1000\n")},
		"sys/fs/cgroup/user.slice/memory.max":               {Data: []byte("3221225472\n")},
		"sys/fs/cgroup/user.slice/memory.current":           {Data: []byte("221225472\n")},
	}
	m := readMemory(root)
	if m.Available != 3<<30-221225472 || m.Limit != "cgroup /sys/fs/cgroup/user.slice/memory.max" {
		t.Fatalf("got %+v", m)
	}
}

// cgroup v1 (the memory controller mounted on its own, the process in a
// sub-cgroup of a container whose root is the mount's root).
func TestReadMemoryCgroupV1(t *testing.T) {
	root := fstest.MapFS{
		"proc/meminfo":        {Data: []byte(meminfo24G)},
		"proc/self/cgroup":    {Data: []byte("5:cpu:/\n4:memory:/box/a\n0::/\n")},
		"proc/self/mountinfo": {Data: []byte("31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n32 30 0:29 /box /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")},
		"sys/fs/cgroup/memory/a/memory.limit_in_bytes": {Data: []byte("2147483648\n")},
		"sys/fs/cgroup/memory/a/memory.usage_in_bytes": {Data: []byte("1073741824\n")},
		"sys/fs/cgroup/memory/memory.limit_in_bytes":   {Data: []byte("9223372036854771712\n")},
	}
	m := readMemory(root)
	if m.Available != 1<<30 || !strings.HasSuffix(m.Limit, "/sys/fs/cgroup/memory/a/memory.limit_in_bytes") {
		t.Fatalf("got %+v", m)
	}
	// Without cgroup limits MemAvailable decides; with nothing readable,
	// nothing is known.
	delete(root, "sys/fs/cgroup/memory/a/memory.limit_in_bytes")
	if m := readMemory(root); m.Available != 24000000<<10 || m.Limit != "MemAvailable" {
		t.Fatalf("got %+v", m)
	}
	if m := readMemory(fstest.MapFS{}); m.Available != 0 {
		t.Fatalf("empty fs: %+v", m)
	}
}

// Issue 31: `bench allreduce -b 2G -e 2G` under a 3 GB limit is refused
// before any allocation, with a size that fits.
func TestCheckMemoryNamesASizeThatFits(t *testing.T) {
	s := Spec{Collective: AllReduce, MinBytes: 2 << 30, MaxBytes: 2 << 30, Factor: 2, DType: ringtail.Float32, Op: ringtail.Sum, Iters: 1}
	err := CheckMemory(s, 2, Memory{Available: 3 << 30, Limit: "cgroup /sys/fs/cgroup/x/memory.max"})
	want := "-e 2G needs about 8.1 GiB (2 ranks × two buffers of 2G) but 3.0 GiB is available (cgroup /sys/fs/cgroup/x/memory.max); lower -e, e.g. -e 512M, or run fewer ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	// The suggestion fits.
	s.MaxBytes = 512 << 20
	if err := CheckMemory(s, 2, Memory{Available: 3 << 30}); err != nil {
		t.Fatal(err)
	}
	s.MaxBytes = 1 << 30
	if err := CheckMemory(s, 2, Memory{Available: 3 << 30}); err == nil {
		t.Fatal("twice the suggestion fits too: the suggestion is not the largest")
	}
	err = CheckMemory(s, 1, Memory{Available: 64 << 30, PerProcess: 1 << 30})
	if err == nil || !strings.Contains(err.Error(), "each process may map 1.0 GiB (ulimit -v); lower -e, e.g. -e 256M") {
		t.Fatalf("ulimit -v: %v", err)
	}
	if err := CheckMemory(s, 4, Memory{}); err != nil {
		t.Fatalf("unknown memory refused: %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{8: "8", 1536: "1536", 64 << 10: "64K", 3 << 20: "3M", 2 << 30: "2G", 1<<30 + 1<<20: "1025M"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}
