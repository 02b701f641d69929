package bench

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// MemoryPerRank is what one rank of the sweep allocates for its data: two
// buffers of the largest size (the collective's input and output), the
// buffers Run makes.
func (s *Spec) MemoryPerRank() int64 { return 2 * s.MaxBytes }

// rankOverhead is what a rank takes besides its buffers (the Go runtime,
// the transport's shared-memory rings and staging): a margin, measured at
// about 30 MB resident for a 2-rank sweep to 1 MiB.
const rankOverhead = 64 << 20

// Memory is how much memory the ranks of this host may still take: the
// least of the kernel's estimate of available memory and what the
// process's memory cgroups (v1 or v2, and their parents) still allow;
// PerProcess is the address-space limit of each process (ulimit -v; 0:
// none). Limit names the tightest bound, for messages.
type Memory struct {
	Available  int64
	Limit      string
	PerProcess int64
}

// CheckMemory returns an error naming the flag to change when ranks
// ranks of s on one host would not fit in m, before anything is
// allocated: the Go runtime would otherwise die with "fatal error: out of
// memory" and a stack trace per rank, or the kernel's OOM killer end
// them. An unknown Memory (Available 0) passes.
func CheckMemory(s Spec, ranks int, m Memory) error {
	per := s.MemoryPerRank() + rankOverhead
	total := per * int64(ranks)
	switch {
	case m.PerProcess > 0 && per > m.PerProcess:
		return fmt.Errorf("-e %s needs about %s per rank (two buffers of %s) but each process may map %s (ulimit -v); lower -e, e.g. -e %s",
			FormatSize(s.MaxBytes), human(per), FormatSize(s.MaxBytes), human(m.PerProcess), FormatSize(fitting(m.PerProcess, 1)))
	case m.Available > 0 && total > m.Available:
		return fmt.Errorf("-e %s needs about %s (%d ranks × two buffers of %s) but %s is available (%s); lower -e, e.g. -e %s, or run fewer ranks",
			FormatSize(s.MaxBytes), human(total), ranks, FormatSize(s.MaxBytes), human(m.Available), m.Limit, FormatSize(fitting(m.Available, ranks)))
	}
	return nil
}

// fitting is the largest power-of-two size whose sweep fits ranks ranks in
// avail bytes (at least 1 KiB).
func fitting(avail int64, ranks int) int64 {
	size := int64(1 << 10)
	for (4*size+rankOverhead)*int64(ranks) <= avail && size < 4<<30 {
		size *= 2
	}
	return size
}

// FormatSize writes a byte count as ParseSize reads it: 8, 64K, 256M, 1G
// when it is a whole multiple, else bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// human writes a byte count in GiB or MiB with one decimal.
func human(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// HostMemory reads this host's Memory from /proc and the cgroup
// filesystems; what it cannot read it leaves out.
func HostMemory() Memory {
	m := readMemory(os.DirFS("/"))
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err == nil && lim.Cur != math.MaxUint64 && lim.Cur < math.MaxInt64 {
		m.PerProcess = int64(lim.Cur)
	}
	return m
}

// readMemory reads MemAvailable and the memory cgroups of this process
// from root (the file system's root: proc/meminfo, proc/self/cgroup,
// proc/self/mountinfo and the cgroup mounts under it).
func readMemory(root fs.FS) Memory {
	var m Memory
	if kb, ok := meminfo(root, "MemAvailable"); ok {
		m.Available, m.Limit = kb<<10, "MemAvailable"
	}
	for _, c := range cgroupDirs(root) {
		for dir := c.dir; ; dir = path.Dir(dir) {
			left, ok := c.left(root, dir)
			if ok && (m.Available == 0 || left < m.Available) {
				m.Available, m.Limit = max(left, 0), "cgroup "+c.name(dir)
			}
			if dir == c.mount || dir == "." || dir == "/" || !strings.HasPrefix(dir, c.mount) {
				break
			}
		}
	}
	return m
}

// meminfo returns a field of /proc/meminfo in kB.
func meminfo(root fs.FS, field string) (int64, bool) {
	f, err := root.Open("proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return v, err == nil
	}
	return 0, false
}

// cgroupDir is this process's memory cgroup directory under one mount.
type cgroupDir struct {
	v2    bool
	mount string // the mount point, without the leading slash
	dir   string // the process's cgroup directory under it
}

// name is how a message names the bound at dir.
func (c cgroupDir) name(dir string) string {
	if c.v2 {
		return "/" + dir + "/memory.max"
	}
	return "/" + dir + "/memory.limit_in_bytes"
}

// left is what the cgroup at dir still allows (its limit less its usage);
// ok is false without a limit.
func (c cgroupDir) left(root fs.FS, dir string) (int64, bool) {
	limitFile, usageFile := "memory.limit_in_bytes", "memory.usage_in_bytes"
	if c.v2 {
		limitFile, usageFile = "memory.max", "memory.current"
	}
	limit, ok := readInt(root, path.Join(dir, limitFile))
	if !ok || limit >= 1<<60 { // v1 has no "max": a huge number means none
		return 0, false
	}
	usage, _ := readInt(root, path.Join(dir, usageFile))
	return limit - usage, true
}

// readInt reads a file holding one integer ("max" is not one).
func readInt(root fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// cgroupDirs finds this process's memory cgroup under each mounted
// hierarchy that has one (cgroup v2's unified one, v1's memory one).
func cgroupDirs(root fs.FS) []cgroupDir {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	var v1, v2 string
	has1, has2 := false, false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, has2 = parts[2], true
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1, has1 = parts[2], true
		}
	}
	mi, err := fs.ReadFile(root, "proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []cgroupDir
	for _, line := range strings.Split(string(mi), "\n") {
		// id parent dev root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		mroot, point := f[3], strings.TrimPrefix(f[4], "/")
		var cg string
		v2mount := false
		switch {
		case g[0] == "cgroup2" && has2:
			cg, v2mount = v2, true
		case g[0] == "cgroup" && has1 && strings.Contains(","+g[2]+",", ",memory,"):
			cg = v1
		default:
			continue
		}
		rel, ok := strings.CutPrefix(cg, mroot)
		if !ok {
			continue // the process's cgroup is not under this mount
		}
		out = append(out, cgroupDir{v2: v2mount, mount: point, dir: path.Join(point, rel)})
	}
	return out
}
