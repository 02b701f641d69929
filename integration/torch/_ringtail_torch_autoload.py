"""Registers ringtail's torch backend in every Python that has the
ringtail-torch wheel installed, without ``import ringtail_torch``.

The wheel puts ``ringtail_torch_autoload.pth`` next to this module in
site-packages; Python runs its one line at start-up, which calls install():
a finder on sys.meta_path that waits for ``import torch`` to finish and
then imports ringtail_torch (its import registers the "ringtail" c10d
backend, makes env:// work under ringtail run and reads
RINGTAIL_DDP_STRAGGLER). Nothing else is imported at start-up; a process
that never imports torch never imports ringtail_torch. torch >= 2.5 also
calls entry_point() through its "torch.backends" entry points, to the same
effect. RINGTAIL_TORCH_AUTOLOAD=0 turns both off.

If importing ringtail_torch fails, torch still imports: the backend is
then registered with a creator that raises the reason in one line.
"""

import sys

from _ringtail_env import env_bool

ENV = "RINGTAIL_TORCH_AUTOLOAD"


def enabled():
    """Whether RINGTAIL_TORCH_AUTOLOAD (default on) lets the backend load
    by itself. A malformed value is said on stderr, in one line, and the
    default kept: this runs at every Python's start-up, which must not
    fail."""
    try:
        return env_bool(ENV, True)
    except ValueError as e:
        print("ringtail: %s (autoload stays on)" % e, file=sys.stderr)
        return True


def register():
    """Imports ringtail_torch (torch being imported); on failure registers a
    backend that says why."""
    try:
        import ringtail_torch  # noqa: F401  (registers the backend)
    except Exception as e:  # noqa: BLE001 - never break `import torch`
        _register_failure(e)


def _register_failure(err):
    try:
        import torch.distributed as dist
    except Exception:  # noqa: BLE001
        return
    if not dist.is_available() or "RINGTAIL" in getattr(dist.Backend, "_plugins", {}):
        return
    reason = "%s: %s" % (type(err).__name__, err)

    def create(*args, **kwargs):
        raise RuntimeError("the ringtail backend did not load (%s): reinstall the ringtail-torch wheel into %s"
                           % (reason, sys.executable))

    try:
        dist.Backend.register_backend("ringtail", create)
    except Exception:  # noqa: BLE001
        pass


def entry_point():
    """torch >= 2.5's "torch.backends" entry point (run at the end of
    ``import torch``)."""
    if enabled():
        register()


class _AfterTorch:
    """A meta-path finder that wraps torch's loader, so that register()
    runs once torch's __init__ has finished. It removes itself."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader:
    """torch's loader, running register() after the module executed."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        register()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install():
    """Called by ringtail_torch_autoload.pth at interpreter start-up."""
    if not enabled():
        return
    if "torch" in sys.modules:
        register()
        return
    if not any(isinstance(f, _AfterTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorch())
