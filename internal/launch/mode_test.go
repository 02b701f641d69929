package launch

import (
	"path/filepath"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// The ranks' logs (--output-filename) are private to the user: a rank's
// output can hold anything, its environment included.
func TestRankLogsArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	l, err := openRankLogs(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.close()
	fspermtest.CheckDir(t, dir)
	for _, p := range []string{"rank.0", "rank.1"} {
		fspermtest.CheckDir(t, filepath.Join(dir, p))
		fspermtest.CheckFile(t, filepath.Join(dir, p, "stdout"))
		fspermtest.CheckFile(t, filepath.Join(dir, p, "stderr"))
	}
}
