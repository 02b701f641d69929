package elastic

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShouldRestart(t *testing.T) {
	for _, c := range []struct {
		code          int
		finished      bool
		restarts, max int
		restartFailed bool
		want          bool
	}{
		{ExitEvicted, false, 0, 5, false, true},
		{ExitEvicted, true, 0, 5, false, false},  // the job is over
		{ExitEvicted, false, 5, 5, false, false}, // budget spent
		{0, false, 0, 5, true, false},
		{1, false, 0, 5, false, false},
		{1, false, 0, 5, true, true},
		{-1, false, 0, 5, true, true}, // killed by a signal
		{ExitJobLost, false, 0, 5, true, false},
	} {
		if got := shouldRestart(c.code, c.finished, c.restarts, c.max, c.restartFailed); got != c.want {
			t.Errorf("%+v: got %v", c, got)
		}
	}
}

// Slot 1's first incarnation exits with ExitEvicted and is replaced; the
// replacement and slot 0 exit 0; the job finishes.
func TestSupervisorReplacesEvicted(t *testing.T) {
	var events []string
	// Slot 0 must exit last (after a clean exit nothing restarts): it
	// waits for the file slot 1's replacement creates, not for a time.
	replaced := filepath.Join(t.TempDir(), "replaced")
	sup, err := NewSupervisor(SupervisorConfig{
		Slots: 2,
		Command: func(slot, inc int) (*exec.Cmd, error) {
			script := fmt.Sprintf("while [ ! -e %q ]; do sleep 0.01; done; exit 0", replaced)
			if slot == 1 {
				script = fmt.Sprintf("exit %d", ExitEvicted)
				if inc > 0 {
					script = fmt.Sprintf("touch %q; exit 0", replaced)
				}
			}
			return exec.Command("/bin/sh", "-c", script), nil
		},
		OnEvent: func(e SupervisorEvent) {
			if e.Started {
				events = append(events, fmt.Sprintf("start %d.%d", e.Slot, e.Incarnation))
			} else {
				events = append(events, fmt.Sprintf("exit %d.%d=%d restart=%v", e.Slot, e.Incarnation, e.ExitCode, e.Restart))
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sup.Run(ctx); err != nil {
		t.Fatalf("Run: %v (events %v)", err, events)
	}
	got := strings.Join(events, "; ")
	for _, want := range []string{"exit 1.0=75 restart=true", "start 1.1", "exit 1.1=0 restart=false", "exit 0.0=0 restart=false"} {
		if !strings.Contains(got, want) {
			t.Errorf("events %q lack %q", got, want)
		}
	}
}

// A crash is not restarted unless asked; with no clean exit the job fails
// and the error names the slot. Cancelling stops processes that would run
// for ten minutes with SIGTERM: they exit through their TERM handler
// (status 7), not by the SIGKILL a minute's grace later.
func TestSupervisorCrashAndCancel(t *testing.T) {
	sup, _ := NewSupervisor(SupervisorConfig{Slots: 1, Command: func(int, int) (*exec.Cmd, error) {
		return exec.Command("/bin/sh", "-c", "exit 3"), nil
	}})
	if err := sup.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "slot 0") {
		t.Fatalf("crash: %v", err)
	}
	dir := t.TempDir()
	var mu sync.Mutex
	exits := map[int]int{}
	sup, _ = NewSupervisor(SupervisorConfig{Slots: 2, StopGrace: time.Minute,
		Command: func(slot, _ int) (*exec.Cmd, error) {
			// Ready once the handler is set, so the cancel cannot come
			// before it.
			script := fmt.Sprintf(`trap 'kill $!; exit 7' TERM; sleep 600 & touch %q; wait`, filepath.Join(dir, fmt.Sprint("ready-", slot)))
			return exec.Command("/bin/sh", "-c", script), nil
		},
		OnEvent: func(e SupervisorEvent) {
			if !e.Started {
				mu.Lock()
				exits[e.Slot] = e.ExitCode
				mu.Unlock()
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(dir, "ready-*")); len(m) == 2 {
				break
			}
		}
		cancel()
	}()
	if err := sup.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if exits[0] != 7 || exits[1] != 7 {
		t.Fatalf("exit statuses by slot %v, want 7 from each one's TERM handler", exits)
	}
	if _, err := NewSupervisor(SupervisorConfig{}); err == nil {
		t.Fatal("empty config accepted")
	}
}
