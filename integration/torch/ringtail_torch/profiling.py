"""Profiler events of the ringtail backend, recorded as torch's own
backends record theirs.

c10d's Gloo and NCCL process groups open a RecordFunction named
``gloo:all_reduce`` (``ProcessGroup::Work``'s profiling title) with the
call's input tensors when the call is issued, mark it async and end it,
with the issuing thread's profiler state, when the work completes. The
ringtail group does the same from Python: ``start`` opens the event on the
issuing thread (``torch.autograd._record_function_with_args_enter``, which
records the input shapes when the profiler asks for them), and the event
ends through ``torch.ops.profiler._call_end_callbacks_on_jit_fut`` when a
future completes, on the thread that completes it, with the issuing
thread's profiler state. The event so starts on one thread and ends on
another, which is what makes torch call it async (``FunctionEvent.is_async``).

Nothing is recorded, and nothing costs more than one check, while no
profiler is enabled.

The first event of a profiler session is preceded by one more, named
``ringtail:clock unix_ns=N``: the wall-clock time at which it opened. It
ties the torch trace's clock (which starts at the profiler) to ringtail's
own timeline (``--timeline``, whose base is a wall-clock time), so
``ringtail timeline merge --torch RANK=TRACE`` lays the two on one clock.
A session is counted from a call made while no profiler was enabled.
"""

import threading
import time

import torch

PREFIX = "ringtail:"

# The name of the clock event, before its wall-clock time in ns
# (internal/obs.TorchClockEvent).
CLOCK_EVENT = "ringtail:clock unix_ns="

# Whether this profiler session has its clock event (reset by a call made
# while no profiler is enabled). A process has one profiler session at a
# time, whichever thread issues its calls.
_clock = {"marked": False}
_clock_lock = threading.Lock()


def _mark_clock():
    """Records the clock event once per profiler session."""
    with _clock_lock:
        if _clock["marked"]:
            return
        _clock["marked"] = True
    with torch.autograd.profiler.record_function(CLOCK_EVENT + str(time.time_ns())):
        pass


def enabled():
    """Whether a profiler records on this thread (autograd and DDP's
    reducer threads inherit the profiler of the thread that started them)."""
    return torch.autograd._profiler_enabled()


def start(op, inputs, prefix=PREFIX):
    """Opens the event ``<prefix><op>`` (``ringtail:all_reduce``) with the
    call's input tensors; returns its handle, or None when no profiler is
    enabled."""
    if not enabled():
        _clock["marked"] = False
        return None
    if not _clock["marked"]:
        _mark_clock()
    return torch.autograd._record_function_with_args_enter(prefix + op, *inputs)


def end_on(handle, fut):
    """Ends the event of handle when fut completes (on the thread that
    completes it); returns the future that completes once the event has
    ended (carrying fut's value or error). Call it before fut can complete,
    or the event ends on this thread and is not async."""
    return torch.ops.profiler._call_end_callbacks_on_jit_fut(handle, fut)


class Pending:
    """An event to end later, from whichever thread finishes the call (a
    point-to-point wait runs on the caller's thread): end() ends it on a
    short-lived helper thread, so the event is async like Gloo's, and
    returns once it has ended. Thread-safe; ends the event once."""

    def __init__(self, handle):
        self._fut = torch.futures.Future()
        self._ended = end_on(handle, self._fut)
        self._lock = threading.Lock()
        self._done = False

    def end(self, timeout=10.0):
        with self._lock:
            if self._done:
                return
            self._done = True
        t = threading.Thread(target=self._fut.set_result, args=(None,), name="ringtail-profiler-end", daemon=True)
        t.start()
        t.join(timeout)
