package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// NamePrefix starts the name of every namespace a bed creates.
const NamePrefix = "rtb-"

// bedName matches the namespaces of a bed: rtb-PID-XXXX-(hub|hN).
var bedName = regexp.MustCompile(`^rtb-([0-9]+)-([0-9a-f]{4})-(hub|h[0-9]+)$`)

// newBedName returns rtb-PID-XXXX for this process.
func newBedName() (string, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("testbed: random name: %w", err)
	}
	return NamePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]), nil
}

// listNetns returns the names of the named network namespaces.
func listNetns(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("testbed: ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// processAlive reports whether pid names a running process.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Sweep deletes the namespaces of beds whose creating process no longer
// runs (left by a crashed run), killing what still runs in them. It
// touches no other namespace, and returns the names it deleted.
func Sweep(ctx context.Context) ([]string, error) {
	names, err := listNetns(ctx)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, n := range names {
		m := bedName.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid != os.Getpid() && !processAlive(pid) {
			stale = append(stale, n)
		}
	}
	var errs []error
	for _, n := range stale {
		errs = append(errs, deleteNetns(ctx, n))
	}
	return stale, errors.Join(errs...)
}

// deleteNetns kills every process in namespace name and deletes it.
func deleteNetns(ctx context.Context, name string) error {
	if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("testbed: ip netns delete %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
