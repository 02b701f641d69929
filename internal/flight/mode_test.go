package flight

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// A dump directory the recorder creates is 0700 and its dumps 0600.
func TestDumpsArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dumps")
	r, err := New(Config{Rank: 0, World: 1, JobID: "job", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r.Begin(allreduce(1, 8), "ring", "")
	r.End(nil)
	path, err := Write(dir, r.Snapshot("failure", nil, time.Second, 0))
	if err != nil {
		t.Fatal(err)
	}
	fspermtest.CheckDir(t, dir)
	fspermtest.CheckFile(t, path)
}
