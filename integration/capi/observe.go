//go:build cgo

package main

/*
#include <stdint.h>
#include "include/ringtail.h"
*/
import "C"

import (
	"math"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/observe"
	"github.com/ringtail-ml/ringtail/straggler/driver"
)

// This file holds what the C ABI tells a rank's observability: the
// training loop's progress (rt_record_progress) and which communicator of
// the process records for another (rt_observe_with).
//
// A rank's metrics address and timeline file belong to the process: the
// first communicator that opens with them serves them, and another opened
// while it lives (a torch subgroup, the straggler hook's) would fail to
// bind the same port. The caller (ringtail_torch) opens the others with
// observability off and names the first as their observer: their
// straggler steps and progress are then recorded there, on the dashboard.

// observed returns the communicator that records s's steps and progress:
// its observer's while that session lives, else its own.
func (s *session) observed() *ringtail.Comm {
	if h := s.observer.Load(); h != 0 {
		if o, err := lookup(C.rt_comm(h)); err == nil {
			return o.comm
		}
	}
	return s.comm
}

// recordingComm is s's communicator for a straggler driver: its steps go to
// s's observer when it has one.
func (s *session) recordingComm() driver.Comm {
	if s.observer.Load() == 0 {
		return s.comm
	}
	return observedComm{Comm: s.comm, s: s}
}

// observedComm is a session's communicator whose steps another session
// records (rt_observe_with); every collective is its own.
type observedComm struct {
	*ringtail.Comm
	s *session
}

var _ driver.Comm = observedComm{}

// Observing reports whether the observer records.
func (o observedComm) Observing() bool { return o.s.observed().Observing() }

// RecordStep records the step with the observer.
func (o observedComm) RecordStep(ev observe.StepEvent) { o.s.observed().RecordStep(ev) }

//export rt_observe_with
func rt_observe_with(h, observer C.rt_comm, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err == nil {
		_, err = lookup(observer)
	}
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	if h == observer {
		return setError(badArg("rt_observe_with: a communicator cannot observe itself"), errbuf, errlen)
	}
	s.observer.Store(uint64(observer))
	return C.RT_OK
}

//export rt_record_progress
func rt_record_progress(h C.rt_comm, step C.int64_t, epoch, elapsedS, loss, accuracy, samplesPerSec, stepTimeS C.double, errbuf *C.char, errlen C.size_t) (rc C.int) {
	defer guard(&rc, errbuf, errlen)
	s, err := lookup(h)
	if err != nil {
		return setError(err, errbuf, errlen)
	}
	seconds := func(v C.double) time.Duration {
		if v > 0 && !math.IsInf(float64(v), 0) {
			return time.Duration(float64(v) * float64(time.Second))
		}
		return 0
	}
	s.observed().RecordProgress(observe.Progress{Step: int(step), Epoch: float64(epoch), Elapsed: seconds(elapsedS), Loss: float64(loss),
		Accuracy: float64(accuracy), SamplesPerSec: float64(samplesPerSec), StepTime: seconds(stepTimeS)})
	return C.RT_OK
}
