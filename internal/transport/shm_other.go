//go:build !linux

package transport

import (
	"net"
	"time"
)

func upgradeShm(c net.Conn, dialer, enabled bool) (net.Conn, string, error) { return c, "", nil }

// sever cuts a link to a dead peer.
func (l *Link) sever() { l.conn.Close() }

// setGrace has nothing to set: no shared memory on this platform.
func setGrace(conn net.Conn, grace time.Duration) {}
