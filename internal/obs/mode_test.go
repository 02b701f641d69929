package obs

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// A rank's timeline names its host and every collective: 0600.
func TestTimelineIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.rank0.json")
	tl, err := openTimeline(path, 0, "testhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.closeFile(); err != nil {
		t.Fatal(err)
	}
	fspermtest.CheckFile(t, path)
}
