//go:build !linux

package transport

import (
	"time"

	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// FastboxPayload is the largest message a fastbox carries.
const FastboxPayload = 4096

// FastLink drives a link's fastbox; there are none on this platform.
type FastLink struct{}

// Fast reports that this platform has no fastboxes.
func (l *Link) Fast() (FastLink, bool) { return FastLink{}, false }

// Send is never called on this platform.
func (FastLink) Send(d *Desc, p []byte, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	return nil
}

// Recv is never called on this platform.
func (FastLink) Recv(d *Desc, dst []byte, fold bool, div int, dt reduce.DType, op reduce.Op, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	return nil
}

// IsDeadline reports whether a fastbox wait ended at its deadline.
func IsDeadline(err error) bool { return false }

// FastPending reports a fastbox message nobody took; there are none here.
func (l *Link) FastPending() (Desc, uint64, bool) { return Desc{}, 0, false }

func (l *Link) markDead(clean bool) {}
