//go:build unix

package flight

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyDump subscribes to SIGUSR1, the signal that asks every recorder
// of the process for a dump; stop unsubscribes.
func notifyDump() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	return ch, func() { signal.Stop(ch) }
}
