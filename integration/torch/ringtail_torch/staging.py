"""CUDA tensors through host memory.

ringtail moves host memory, so a collective on CUDA tensors runs on pinned
host copies: when the call is issued, each device tensor it reads is copied
to a pinned host buffer asynchronously on the tensor's current stream (so
the copy is ordered after the kernels that produced the tensor, as with
NCCL), and an event is recorded. The worker thread waits for that event,
runs the collective on the host copies, copies the results back to the
device asynchronously on the same stream, and completes the Work only once
that copy has finished (it synchronises on a second event). A caller that
waits on the Work, or chains on its future as DDP does, thus always sees
the result on the device.

Pinned buffers come from torch's caching host allocator, which records the
copies' streams, so a buffer is reused only after its copies are done.

CPU tensors are untouched: Staging.host returns them as they are and the
other methods do nothing, so CPU-only jobs never import or initialise CUDA.
"""

import torch


class Staging:
    """The host copies of one call's CUDA tensors, and the stream their
    copies run on. Create one per call on the issuing thread; call host()
    for each tensor, issued() once, then before() and after() on the
    thread that runs the collective."""

    __slots__ = ("pairs", "stream", "ready")

    def __init__(self):
        self.pairs = []  # (device tensor, host copy, copy back)
        self.stream = None
        self.ready = None

    @property
    def active(self):
        """Whether the call has CUDA tensors."""
        return self.stream is not None

    def host(self, t, copy_in=True, copy_out=True):
        """Returns t itself when it is not a CUDA tensor, else a pinned
        contiguous host tensor of its shape and dtype: filled from t
        (asynchronously, on t's current stream) when copy_in, and copied
        back into t by after() when copy_out."""
        if t.device.type != "cuda":
            return t
        stream = torch.cuda.current_stream(t.device)
        if self.stream is None:
            self.stream = stream
        elif stream.device != self.stream.device:
            raise ValueError("ringtail: one collective's CUDA tensors must be on one device (%s and %s)"
                             % (self.stream.device, stream.device))
        h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        if copy_in:
            with torch.cuda.stream(self.stream):
                h.copy_(t, non_blocking=True)
        self.pairs.append((t, h, copy_out))
        return h

    def issued(self):
        """Marks the end of the device-to-host copies (issuing thread)."""
        if self.stream is not None:
            self.ready = torch.cuda.Event()
            self.ready.record(self.stream)

    def before(self):
        """Waits for the device-to-host copies (worker thread)."""
        if self.ready is not None:
            self.ready.synchronize()

    def after(self):
        """Copies the results back to the devices on the call's stream and
        waits until they are there (worker thread)."""
        if self.stream is None:
            return
        with torch.cuda.stream(self.stream):
            for t, h, out in self.pairs:
                if out:
                    t.copy_(h, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.stream)
        done.synchronize()

    def wrap(self, job):
        """job, run between before() and after() when the call has CUDA
        tensors; job itself otherwise."""
        if self.stream is None:
            return job

        def staged():
            self.before()
            result = job()
            self.after()
            return result

        return staged
