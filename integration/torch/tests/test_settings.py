"""env_bool parses RINGTAIL_* booleans as the Go runtime does
(internal/settings.ParseBool); needs neither torch nor the library."""

import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _ringtail_env import BOOL_VALUES, env_bool  # noqa: E402
from _ringtail_torch_autoload import enabled  # noqa: E402


class EnvBoolTest(unittest.TestCase):
    def test_accepts_a_fixed_set(self):
        for value, default, want in [("", False, False), ("", True, True), ("1", False, True), ("TRUE", False, True),
                                     ("yes", False, True), (" On ", False, True), ("0", True, False),
                                     ("false", True, False), ("No", True, False), ("off", True, False)]:
            with mock.patch.dict(os.environ, {"RINGTAIL_X": value}):
                self.assertEqual(env_bool("RINGTAIL_X", default), want, value)

    def test_refuses_the_rest_naming_the_variable(self):
        for value in ("2", "y", "enable", "treu"):
            with mock.patch.dict(os.environ, {"RINGTAIL_NO_SHM": value}):
                with self.assertRaises(ValueError) as cm:
                    env_bool("RINGTAIL_NO_SHM")
                self.assertIn("RINGTAIL_NO_SHM", str(cm.exception))
                self.assertIn(BOOL_VALUES, str(cm.exception))

    def test_autoload_says_a_bad_value_and_stays_on(self):
        with mock.patch.dict(os.environ, {"RINGTAIL_TORCH_AUTOLOAD": "maybe"}), \
                mock.patch("sys.stderr") as err:
            self.assertTrue(enabled())
            self.assertIn("RINGTAIL_TORCH_AUTOLOAD", "".join(c.args[0] for c in err.write.call_args_list))
        with mock.patch.dict(os.environ, {"RINGTAIL_TORCH_AUTOLOAD": "off"}):
            self.assertFalse(enabled())


if __name__ == "__main__":
    unittest.main()
