package launch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/p2p/p2ptest"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// The launcher's libp2p coordinator logs the connections it refuses
// (issue 18: every refusal logged, rate-limited). It was opened without a
// logger, so its admission gate refused strangers in silence.
func TestTheLibp2pCoordinatorLogsWhatItRefuses(t *testing.T) {
	logs := &syncbuf.Buffer{}
	ln, port, err := listenCoordinator(context.Background(), "libp2p", "127.0.0.1:0", "refusal-job", []byte("refusal-secret"), zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p2ptest.SendGarbage(t, fmt.Sprintf("127.0.0.1:%d", port))
	if !strings.Contains(logs.String(), "refused an unauthenticated connection") {
		t.Fatalf("the refusal is not logged: %q", logs.String())
	}
}
