package p2ptest

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// SendGarbage dials addr (host:port), sends a multistream-select message
// whose length is 2^34, which libp2p refuses at once, and waits up to 30 s
// for the listener to close the connection (an EOF, or a reset as the
// garbage is left unread). It fails t otherwise.
func SendGarbage(t testing.TB, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0xff, 0xff, 0xff, 0xff, 0x7f, 'x'}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s did not close a garbage connection: %v", addr, err)
	}
}
