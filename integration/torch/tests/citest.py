"""What a test does when a tool it needs is missing from the machine, as
internal/citest does for the Go tests: skip with the reason, or, under CI
(CI=true, which .ci/run sets, and which installs every tool the tests
use), fail, so that a broken install step cannot pass unseen as a skip.

Only for missing tools and privileges: a test that needs hardware CI does
not have (a CUDA device) keeps a plain skip."""

import functools
import os
import unittest


def in_ci():
    """Whether the tests run under CI (CI=true)."""
    return os.environ.get("CI") == "true"


def needs(present, why):
    """A decorator: unittest.skipUnless(present, why), except under CI,
    where a test whose tool is missing fails with why."""
    if present or not in_ci():
        return unittest.skipUnless(present, why)

    def decorate(test):
        @functools.wraps(test)
        def failing(self, *args, **kwargs):
            self.fail("%s (CI=true: .ci/run installs it, so its absence fails the test)" % why)
        return failing
    return decorate
