"""Point-to-point for the ringtail backend: send, recv, recv_anysource
(and so isend, irecv, batch_isend_irecv, P2POp).

Messages go through the C ABI's requests (rt_isend, rt_irecv), which ride
on ringtail's eager messages matched by source and tag in Go (the
ringtail.Mailbox): a send is queued at once and never waits for the
receiver to post; a receive is posted at once and matched in post order;
messages between two ranks with one tag arrive in the order they were
sent. Neither goes through the group's collective queue, so point-to-point
traffic and collectives never wait for each other, and two ranks may both
send before they receive, as Gloo allows.

Each message carries the tensor's bytes; a receive whose tensor has a
different size fails (Gloo does too).
"""

import datetime
import threading

import torch
from torch._C._distributed_c10d import Work

from . import profiling
from ._lib import RT_ANY_SOURCE, RT_MAX_TAG, RT_UINT8, RingtailError


def check_tag(tag):
    if not isinstance(tag, int) or tag < 0 or tag > RT_MAX_TAG:
        raise ValueError("ringtail: point-to-point tag %r outside 0..%d" % (tag, RT_MAX_TAG))


def timeout_ms(timeout, default):
    """Milliseconds of a Work.wait timeout (a timedelta; zero or None means
    the group's default)."""
    if timeout is None or (isinstance(timeout, datetime.timedelta) and timeout.total_seconds() <= 0):
        timeout = default
    if isinstance(timeout, datetime.timedelta):
        return max(1, int(timeout.total_seconds() * 1000))
    return max(1, int(float(timeout) * 1000))


class P2PWork(Work):
    """The Work of one send or receive. wait() returns once it has finished
    (raising its error), within the group's timeout: a receive that gets
    nothing in that time is withdrawn and raises a timeout naming the rank
    it waited for; a send still in progress raises and goes on (ringtail
    fails it at the operation timeout). The tensors stay referenced by the
    group until the request has finished, so their memory outlives it.
    Its profiler event (ringtail:send, ringtail:recv,
    ringtail:recvAnySource; event, a profiling.Pending or None) ends when
    wait() sees it finish, as Gloo's ends in its Work's wait()."""

    def __init__(self, pg, req, tensor, keep, finish, what, is_recv, event=None):
        super().__init__()
        self._event = event
        self._pg, self._req, self._tensor, self._keep, self._finish, self._what = pg, req, tensor, keep, finish, what
        self._is_recv = is_recv
        self._lock = threading.Lock()
        self._finished = False
        self._error = None
        self._fut = None

    def _complete(self, timeout=None):
        """Waits for the request (timeout: a Work.wait argument); runs the
        copy-back once. Raises the request's error."""
        with self._lock:
            if not self._finished:
                ms = timeout_ms(timeout, self._pg._timeout)
                try:
                    src = self._req.wait(ms)
                    if src is None:
                        if self._is_recv:
                            self._req.cancel()  # withdrawn: the buffer is free again
                            self._error = RingtailError(5, "%s: nothing arrived within %d ms" % (self._what, ms))
                        else:
                            raise RingtailError(5, "%s: not handed over within %d ms (still in progress)" % (self._what, ms))
                    elif self._finish is not None:
                        self._finish()
                except RingtailError as e:
                    if not self._req.finished:
                        raise  # a send still in progress: keep it
                    self._error = e
                self._finished = True
                self._pg._p2p_done(self)
                if self._event is not None:
                    self._event.end()
        if self._error is not None:
            raise self._error

    def wait(self, timeout=None):
        self._complete(timeout)
        return True

    def is_completed(self):
        return self._finished or self._req.done()

    def is_success(self):
        if not self.is_completed():
            return False
        try:
            self._complete()
        except RuntimeError:
            return False
        return True

    def exception(self):
        return self._error

    def result(self):
        self._complete()
        return [self._tensor]

    def _source_rank(self):
        self._complete()
        return self._req.source

    source_rank = _source_rank

    def get_future(self):
        with self._lock:
            if self._fut is None:
                fut = torch.futures.Future()

                def waiter():
                    try:
                        self._complete()
                    except BaseException as e:  # noqa: BLE001 - the future carries it
                        fut.set_exception(e)
                    else:
                        fut.set_result([self._tensor])

                threading.Thread(target=waiter, name="ringtail-p2p-future", daemon=True).start()
                self._fut = fut
            return self._fut


def _host_buffer(t, fill):
    """A contiguous host tensor for t: t itself when it is one, else a
    (pinned, for CUDA) copy, filled from t when fill (synchronously: the
    send is queued right after)."""
    if t.device.type == "cpu" and t.is_contiguous():
        return t, None
    if t.device.type == "cuda":
        stream = torch.cuda.current_stream(t.device)
        h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        if fill:
            with torch.cuda.stream(stream):
                h.copy_(t, non_blocking=True)
            stream.synchronize()
        return h, stream
    return (t.detach().contiguous() if fill else torch.empty(t.shape, dtype=t.dtype)), None


def _event(pg, op, t):
    """The profiler event of a point-to-point call (Gloo's titles: send,
    recv, recvAnySource), or None when no profiler is enabled."""
    h = profiling.start(op, [t], pg.profiling_prefix)
    return profiling.Pending(h) if h is not None else None


def send(pg, t, dst, tag):
    """ProcessGroup.send of one tensor."""
    check_tag(tag)
    event = _event(pg, "send", t)
    w, _ = _host_buffer(t, True)
    nbytes = w.numel() * w.element_size()
    req = pg._comm.isend(w.data_ptr(), nbytes, RT_UINT8, dst, tag)
    return pg._p2p_started(P2PWork(pg, req, t, (t, w), None, "send to rank %d (tag %d)" % (dst, tag), False, event))


def recv(pg, t, src, tag):
    """ProcessGroup.recv (src a rank) or recv_anysource (src None)."""
    check_tag(tag)
    event = _event(pg, "recv" if src is not None else "recvAnySource", t)
    w, stream = _host_buffer(t, False)
    finish = None
    if w is not t:

        def finish():
            if stream is None:
                t.copy_(w)
                return
            with torch.cuda.stream(stream):
                t.copy_(w, non_blocking=True)
            stream.synchronize()

    nbytes = w.numel() * w.element_size()
    source = RT_ANY_SOURCE if src is None else src
    what = "recv from %s (tag %d)" % ("any rank" if src is None else "rank %d" % src, tag)
    req = pg._comm.irecv(w.data_ptr(), nbytes, RT_UINT8, source, tag)
    return pg._p2p_started(P2PWork(pg, req, t, (t, w), finish, what, True, event))
