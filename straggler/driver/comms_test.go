package driver

import (
	"testing"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
)

// startComms creates n communicators in this process over real sockets.
func startComms(t testing.TB, n int) []*ringtail.Comm { return commtest.Start(t, n, nil) }
