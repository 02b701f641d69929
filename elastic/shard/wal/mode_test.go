package wal

import (
	"path/filepath"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// The WAL, its snapshot and the directory it creates are private to the
// user: the queue names the job's data and its workers.
func TestStore_FilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "shards")
	s := openT(t, dir, Options{})
	workload(t, s, 20)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	fspermtest.CheckDir(t, filepath.Dir(dir))
	fspermtest.CheckDir(t, dir)
	fspermtest.CheckFile(t, filepath.Join(dir, LogFile))
	fspermtest.CheckFile(t, filepath.Join(dir, SnapshotFile))
}
