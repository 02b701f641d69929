"""RingtailError names every RT_ERR_* code of include/ringtail.h; needs
neither torch nor the library (_lib.py is loaded from its file)."""

import importlib.util
import os
import re
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_HEADER = os.path.join(_HERE, "..", "..", "capi", "include", "ringtail.h")
_LIB = os.path.join(_HERE, "..", "ringtail_torch", "_lib.py")


def _load_lib():
    spec = importlib.util.spec_from_file_location("ringtail_lib_under_test", _LIB)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ErrorCodesTest(unittest.TestCase):
    def setUp(self):
        self.lib = _load_lib()
        with open(_HEADER) as f:
            self.codes = {m.group(1): int(m.group(2))
                          for m in re.finditer(r"^#define (RT_ERR_[A-Z_]+) (\d+)", f.read(), re.M)}

    def test_every_header_code_has_a_name(self):
        self.assertIn("RT_ERR_INTEGRITY", self.codes)
        for name, value in self.codes.items():
            self.assertIn(value, self.lib.ERROR_NAMES, name)
        self.assertEqual(len(set(self.lib.ERROR_NAMES.values())), len(self.lib.ERROR_NAMES))

    def test_integrity_is_a_runtime_error_naming_the_link(self):
        code = self.codes["RT_ERR_INTEGRITY"]
        msg = ("ringtail rank 1: frame integrity: rank 0: frame 7 from rank 0 to rank 1 on channel 0 "
               "(10.0.0.1:4000 -> 10.0.0.2:5000) failed its integrity check (tag mismatch)")
        e = self.lib.RingtailError(code, msg)
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.kind, "frame integrity")
        self.assertEqual(str(e), msg)
        bare = self.lib.RingtailError(code, "tag mismatch on the link from rank 0 to rank 1")
        self.assertEqual(str(bare), "ringtail: frame integrity: tag mismatch on the link from rank 0 to rank 1")


if __name__ == "__main__":
    unittest.main()
