package job

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// Without --elastic-state-dir the shard state lives in
// ./.ringtail/<job id>/shards (each new directory 0700) and outlives the
// launcher: a launcher restarted in the same directory with the same job
// id opens the WAL the first one left, with the queue where it was.
func TestDefaultStateDirIsUnderTheWorkingDirAndSurvivesARestart(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	const id = "rt-restart"
	cfg := shard.Config{Samples: 100, ShardSize: 10, Epochs: 1, Seed: 1}

	// The first launcher: two workers take a shard each, one finishes it,
	// then the launcher is gone.
	dir, err := stateDirFor(Config{}, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(work, ".ringtail", id, "shards"); dir != want {
		t.Fatalf("state directory %s, want %s", dir, want)
	}
	for _, d := range []string{filepath.Join(work, ".ringtail"), filepath.Join(work, ".ringtail", id), dir} {
		fspermtest.CheckDir(t, d)
	}
	s, err := wal.Open(dir, cfg, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var held []int64
	for _, w := range []string{"w0", "w1"} {
		r, err := s.Apply(shard.Command{Op: shard.OpPull, Worker: w})
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		held = append(held, r.Shard.ID)
	}
	if _, err := s.Apply(shard.Command{Op: shard.OpDone, Worker: "w0", Shard: held[0]}); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The restarted launcher, same job id.
	again, err := stateDirFor(Config{}, id)
	if err != nil || again != dir {
		t.Fatalf("restart: state directory %s, %v; want %s", again, err, dir)
	}
	s2, err := wal.Open(again, cfg, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.Snapshot(); !reflect.DeepEqual(got, before) {
		t.Fatalf("restarted queue:\n%+v\nwant the one left:\n%+v", got, before)
	}
	if st := s2.Stats(); st.Done != 1 || st.Doing != 1 {
		t.Fatalf("restarted stats %+v, want the 1 shard done and the 1 held before", st)
	}
}

// --elastic-state-dir chooses the directory (created 0700 when missing;
// nothing under the working directory).
func TestStateDirFlagChoosesAnother(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	want := filepath.Join(t.TempDir(), "mine", "state")
	dir, err := stateDirFor(Config{StateDir: want}, "rt-x")
	if err != nil || dir != want {
		t.Fatalf("state directory %s, %v; want %s", dir, err, want)
	}
	fspermtest.CheckDir(t, want)
	if _, err := os.Stat(filepath.Join(work, ".ringtail")); !os.IsNotExist(err) {
		t.Fatalf(".ringtail under the working directory: %v", err)
	}
}

// A job id names a directory, so one that would escape it is refused.
func TestJobIDMustNameOneDirectory(t *testing.T) {
	for _, id := range []string{"a/b", "..", ".", `a\b`} {
		cfg := Config{NP: 1, Command: []string{"true"}, JobID: id}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "job id") {
			t.Errorf("job id %q: Validate = %v, want a refusal naming the job id", id, err)
		}
		if _, err := stateDirFor(Config{}, id); err == nil {
			t.Errorf("job id %q: stateDirFor accepted it", id)
		}
	}
	if err := (Config{NP: 1, Command: []string{"true"}, JobID: "rt-0123abcd"}).Validate(); err != nil {
		t.Errorf("a plain job id: %v", err)
	}
}
