//go:build !unix

package flight

import "os"

// notifyDump: no SIGUSR1 on this platform (dumps come from failures and
// /debug/flight only).
func notifyDump() (<-chan os.Signal, func()) { return nil, func() {} }
