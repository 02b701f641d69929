package wal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/shard"
)

var testCfg = shard.Config{Samples: 1000, ShardSize: 25, Epochs: 2, Shuffle: true, Seed: 3}

// openT opens a store; the file is closed at cleanup without a snapshot,
// like a process that was killed.
func openT(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, testCfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.f.Close() })
	return s
}

// workload drives a store with a deterministic mix of commands and
// returns the queue snapshot after every logged record (index = seq).
func workload(t *testing.T, s *Store, n int) []shard.Snapshot {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	states := []shard.Snapshot{s.Snapshot()}
	held := map[string][]int64{}
	for len(states) <= n {
		w := fmt.Sprintf("w%d", rng.IntN(3))
		var cmd shard.Command
		switch {
		case rng.IntN(2) == 0 || len(held[w]) == 0:
			cmd = shard.Command{Op: shard.OpPull, Worker: w}
		case rng.IntN(8) == 0:
			cmd = shard.Command{Op: shard.OpDied, Worker: w}
			held[w] = nil
		default:
			cmd = shard.Command{Op: shard.OpDone, Worker: w, Shard: held[w][0]}
			held[w] = held[w][1:]
		}
		res, err := s.Apply(cmd)
		if err != nil {
			if errors.Is(err, shard.ErrFinished) {
				t.Fatalf("job finished after %d records; the workload needs %d", len(states)-1, n)
			}
			if errors.Is(err, shard.ErrNoShard) {
				continue
			}
			t.Fatal(err)
		}
		if cmd.Op == shard.OpPull {
			held[w] = append(held[w], res.Shard.ID)
		}
		if res.Changed {
			states = append(states, s.Snapshot())
			if s.Seq() != uint64(len(states)-1) {
				t.Fatalf("seq %d after %d records", s.Seq(), len(states)-1)
			}
		}
	}
	return states
}

// A coordinator dies while writing record n: the log ends mid-record.
// Reopening must restore exactly the state after record n−1 (everything
// that was acknowledged), log the torn tail, and keep appending cleanly.
func TestStore_TornTailMidRecordLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SnapshotEvery: 1 << 20})
	states := workload(t, s, 40)

	path := filepath.Join(dir, LogFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Find the start of the last record and cut it in half.
	off, last := 0, 0
	for off < len(b) {
		_, n, err := readFrame(b[off:], MaxRecordLen)
		if err != nil {
			t.Fatal(err)
		}
		last = off
		off += n
	}
	if err := os.Truncate(path, int64(last+(off-last)/2)); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	r := openT(t, dir, Options{SnapshotEvery: 1 << 20, Logger: zerolog.New(&logs)})
	if r.Seq() != 39 {
		t.Fatalf("recovered seq %d, want 39", r.Seq())
	}
	if !reflect.DeepEqual(r.Snapshot(), states[39]) {
		t.Fatalf("recovered state differs from the state after record 39")
	}
	if !strings.Contains(logs.String(), "torn or corrupt tail") || !strings.Contains(logs.String(), `"ignored_bytes"`) {
		t.Fatalf("recovery must log the torn tail; got %s", logs.String())
	}
	// The cut is permanent: new records follow record 39 and survive.
	if _, err := r.Apply(shard.Command{Op: shard.OpDied, Worker: "w0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(shard.Command{Op: shard.OpPull, Worker: "w9"}); err != nil {
		t.Fatal(err)
	}
	want := r.Snapshot()
	again := openT(t, dir, Options{})
	if !reflect.DeepEqual(again.Snapshot(), want) {
		t.Fatal("records appended after recovery were lost")
	}
}

// A flipped byte in the last record fails its CRC; the record is dropped.
func TestStore_CorruptLastRecordIsDetectedByCRC(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SnapshotEvery: 1 << 20})
	states := workload(t, s, 10)
	path := filepath.Join(dir, LogFile)
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r := openT(t, dir, Options{Logger: zerolog.New(&logs)})
	if !reflect.DeepEqual(r.Snapshot(), states[9]) {
		t.Fatal("state after dropping the corrupt record differs from record 9's")
	}
	if !strings.Contains(logs.String(), "checksum mismatch") {
		t.Fatalf("log should name the checksum: %s", logs.String())
	}
}

// Snapshots every 7 records plus the log tail rebuild the state, also when
// the process died between installing a snapshot and emptying the log.
func TestStore_SnapshotPlusLogReplay(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SnapshotEvery: 7})
	states := workload(t, s, 52)
	r := openT(t, dir, Options{SnapshotEvery: 7})
	if r.Seq() != 52 || !reflect.DeepEqual(r.Snapshot(), states[52]) {
		t.Fatalf("reopened at seq %d with a different state", r.Seq())
	}

	// Crash between snapshot rename and log truncation: the old log is
	// still there and overlaps the snapshot.
	logPath := filepath.Join(dir, LogFile)
	before, _ := os.ReadFile(logPath)
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, before, 0o644); err != nil {
		t.Fatal(err)
	}
	again := openT(t, dir, Options{})
	if again.Seq() != 52 || !reflect.DeepEqual(again.Snapshot(), states[52]) {
		t.Fatalf("overlapping log replayed twice: seq %d", again.Seq())
	}
}

func TestStore_RefusesAnotherJobsDirectory(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	if _, err := s.Apply(shard.Command{Op: shard.OpPull, Worker: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other := testCfg
	other.Seed++
	if _, err := Open(dir, other, Options{}); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("err = %v, want ErrConfigMismatch", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SnapshotFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testCfg, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage snapshot: err = %v, want ErrCorrupt", err)
	}
}

// Rejected commands are not logged: polling an empty queue must not grow
// the log.
func TestStore_RejectedCommandsAreNotLogged(t *testing.T) {
	dir := t.TempDir()
	cfg := shard.Config{Samples: 10, ShardSize: 10, Epochs: 1}
	s, err := Open(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Apply(shard.Command{Op: shard.OpPull, Worker: "a"})
	for range 100 {
		if _, err := s.Apply(shard.Command{Op: shard.OpPull, Worker: "b"}); !errors.Is(err, shard.ErrNoShard) {
			t.Fatalf("err = %v", err)
		}
	}
	if s.Seq() != 1 {
		t.Fatalf("seq %d after one accepted command", s.Seq())
	}
}

// The real thing: a child process applies commands and prints each
// acknowledgement; it is killed with SIGKILL mid-stream; every command it
// acknowledged must be in the reopened store.
func TestStore_SIGKILLedWriterLosesNoAcknowledgedCommand(t *testing.T) {
	if os.Getenv("RINGTAIL_WAL_CRASH_DIR") != "" {
		t.Skip("helper mode")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreCrashHelper$")
	cmd.Env = append(os.Environ(), "RINGTAIL_WAL_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var acked []string
	deadline := time.Now().Add(20 * time.Second)
	for len(acked) < 60 && time.Now().Before(deadline) && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ack ") {
			acked = append(acked, sc.Text())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if len(acked) < 60 {
		t.Fatalf("helper acknowledged only %d commands", len(acked))
	}

	s, err := Open(dir, crashCfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := s.Snapshot()
	done := map[int64]bool{}
	for _, i := range snap.Done {
		done[i] = true
	}
	doing := map[int64]bool{}
	for _, h := range snap.Doing {
		doing[h.Index] = true
	}
	for _, a := range acked {
		f := strings.Fields(a) // ack pull|done ID
		id, _ := strconv.ParseInt(f[2], 10, 64)
		if f[1] == "done" && !done[id] {
			t.Fatalf("acknowledged %q but shard %d is not DONE after restart", a, id)
		}
		if f[1] == "pull" && !done[id] && !doing[id] {
			t.Fatalf("acknowledged %q but shard %d is TODO after restart", a, id)
		}
	}
	if got, min := s.Seq(), uint64(len(acked)); got < min {
		t.Fatalf("store has %d records, %d were acknowledged", got, min)
	}
}

var crashCfg = shard.Config{Samples: 5000, ShardSize: 1, Epochs: 1}

// TestStoreCrashHelper is the child of the SIGKILL test; it runs only when
// RINGTAIL_WAL_CRASH_DIR is set.
func TestStoreCrashHelper(t *testing.T) {
	dir := os.Getenv("RINGTAIL_WAL_CRASH_DIR")
	if dir == "" {
		t.Skip("helper for TestStore_SIGKILLedWriterLosesNoAcknowledgedCommand")
	}
	s, err := Open(dir, crashCfg, Options{SnapshotEvery: 25})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for {
		r, err := s.Apply(shard.Command{Op: shard.OpPull, Worker: "w"})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("ack pull %d\n", r.Shard.ID)
		if _, err := s.Apply(shard.Command{Op: shard.OpDone, Worker: "w", Shard: r.Shard.ID}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("ack done %d\n", r.Shard.ID)
	}
}

// BenchmarkStore_PullDone measures a durable pull+done pair (two fsync'd
// records).
func BenchmarkStore_PullDone(b *testing.B) {
	s, err := Open(b.TempDir(), shard.Config{Samples: 1 << 20, ShardSize: 1, Epochs: 1}, Options{SnapshotEvery: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer s.f.Close()
	for b.Loop() {
		r, err := s.Apply(shard.Command{Op: shard.OpPull, Worker: "w"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Apply(shard.Command{Op: shard.OpDone, Worker: "w", Shard: r.Shard.ID}); err != nil {
			b.Fatal(err)
		}
	}
}
