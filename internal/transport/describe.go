package transport

// Transport names what a link moves data over, for metrics and logs:
// "shm" (shared-memory rings; "shm+fastbox" when small messages also go
// through fastboxes), else the connection's network: "unix", "tcp",
// "libp2p", or "pipe" for the in-memory network.
func (l *Link) Transport() string {
	if l.Shared() {
		if _, ok := l.Fast(); ok {
			return "shm+fastbox"
		}
		return "shm"
	}
	if a := l.conn.LocalAddr(); a != nil {
		return a.Network()
	}
	return "unknown"
}

// Fallback says why the link fell back from shared memory to a unix
// socket ("" when it did not).
func (l *Link) Fallback() string { return l.fallback }
