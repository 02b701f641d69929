package transport

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// unixPair returns two connected unix sockets.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// A shared-memory upgrade that fails is not silent: each side that wanted
// it says why its link is a plain unix socket (the mesh logs the reason at
// warn level and observability shows it). Here the offer comes without
// its memory segment.
func TestAFailedSharedMemoryUpgradeSaysWhy(t *testing.T) {
	a, b := unixPair(t)
	done := make(chan string, 1)
	go func() {
		// A dialer whose offer lost its file descriptor: the offer byte alone.
		if _, err := a.Write([]byte{shmOffer}); err != nil {
			done <- err.Error()
			return
		}
		var ack [1]byte
		if _, err := a.Read(ack[:]); err != nil || ack[0] != shmDecline {
			done <- "no decline"
			return
		}
		done <- ""
	}()
	c, fallback, err := upgradeShm(b, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, isShm := c.(*shmConn); isShm {
		t.Fatal("upgraded without a segment")
	}
	if !strings.Contains(fallback, "shared memory unavailable") || !strings.Contains(fallback, "no file descriptor") {
		t.Fatalf("fallback reason %q", fallback)
	}
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}

	// The dialer of a declined offer says so too; a rank that turned
	// shared memory off (RINGTAIL_NO_SHM) has nothing to report.
	a, b = unixPair(t)
	go func() {
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, _ := b.ReadMsgUnix(buf, oob)
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}
		}
		b.Write([]byte{shmDecline})
	}()
	c, fallback, err = upgradeShm(a, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, isShm := c.(*shmConn); isShm || !strings.Contains(fallback, "declined by the peer") {
		t.Fatalf("declined offer: shm %v, fallback %q", isShm, fallback)
	}
	a, b = unixPair(t)
	go func() {
		buf := make([]byte, 1)
		b.Read(buf)
		b.Write([]byte{shmDecline})
	}()
	if _, fallback, err := upgradeShm(a, true, false); err != nil || fallback != "" {
		t.Fatalf("shared memory off: fallback %q, err %v", fallback, err)
	}
}
