package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/citest"
)

// Missing says why a bed cannot be built here ("" when it can): not root,
// or ip, tc (iproute2) or, when nft is true, nft (nftables) not found.
func Missing(nft bool) string {
	if os.Geteuid() != 0 {
		return "needs root to create network namespaces"
	}
	tools := []string{"ip", "tc"}
	if nft {
		tools = append(tools, "nft")
	}
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("needs %s on PATH (apt-get install iproute2 nftables)", strings.Join(missing, " and "))
	}
	if _, err := os.Stat("/proc/thread-self/ns/net"); err != nil {
		return "needs network namespaces (/proc/thread-self/ns/net)"
	}
	return ""
}

// Require skips t when a bed cannot be built here (see Missing; nft: the
// test needs loss or the proxy). Under CI (CI=true, which .ci/run sets),
// where .ci/run installs the tools and runs as root, anything missing —
// root included — fails the test instead of skipping it
// (citest.Missing), so neither a broken install step nor a CI that lost
// root passes unseen.
func Require(t testing.TB, nft bool) {
	t.Helper()
	if why := Missing(nft); why != "" {
		citest.Missing(t, "testbed: "+why)
	}
}

// ForTest builds a bed for t (Require(t, nft) first) and removes it when
// t ends, whatever the outcome. Its warnings are logged to t (cfg.Logger
// is replaced).
func ForTest(t testing.TB, nft bool, cfg Config) *Bed {
	t.Helper()
	Require(t, nft)
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("testbed: close: %v", err)
		}
	})
	return b
}
