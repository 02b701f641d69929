"""RINGTAIL_* booleans parsed the one way the Go runtime parses them
(internal/settings.ParseBool), for the PyTorch package, its autoload and
its build. It imports nothing beyond os: the autoload runs it at every
Python's start-up and the package's modules use it without a cycle back
through the autoload."""

import os

BOOL_VALUES = "1/0, true/false, yes/no or on/off"


def env_bool(name, default=False):
    """The value of the boolean variable name, parsed as the Go runtime
    parses every RINGTAIL_* boolean (internal/settings.ParseBool): 1, true,
    yes, on and 0, false, no, off (case and surrounding space ignored);
    unset or empty is default; anything else raises ValueError naming the
    variable and the accepted values. Every RINGTAIL_* boolean the Python
    package reads goes through it (this module imports nothing, so the
    package and its build can use it without torch)."""
    value = os.environ.get(name, "")
    v = value.strip().lower()
    if v == "":
        return default
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError("%s=%r is not a boolean: use %s" % (name, value, BOOL_VALUES))
