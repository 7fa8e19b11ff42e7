#!/usr/bin/env python3
"""The layering check on tiny fake trees: it passes a tree whose includes point down, and fails,
naming both files, one with an upward include, an undeclared folder or a stale DEPS entry."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import check_layering  # noqa: E402


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class CheckLayeringTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.src = self.dir.name
        write(self.src, "base/DEPS", "# the floor\n")
        write(self.src, "base/status.h", "#pragma once\n#include <string>\n")
        write(self.src, "store/DEPS", "base  # status\n")
        write(self.src, "store/record.h", '#include "base/status.h"\n#include "store/other.h"\n')

    def tearDown(self):
        self.dir.cleanup()

    def test_includes_pointing_down_pass(self):
        self.assertEqual(check_layering.check(self.src), [])
        self.assertEqual(check_layering.main(["x", self.src]), 0)

    def test_upward_include_fails_naming_both_files(self):
        write(self.src, "base/file.cc", '#include "base/status.h"\n  #  include "store/record.h"\n')
        problems = check_layering.check(self.src)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn(os.path.join(self.src, "base", "file.cc"), problems[0])
        self.assertIn('"store/record.h"', problems[0])
        self.assertIn("base/ may not include from store/", problems[0])
        self.assertEqual(check_layering.main(["x", self.src]), 1)

    def test_includes_that_are_not_ours_are_ignored(self):
        write(self.src, "base/x.cc", '#include <store/record.h>\n#include "gtest/gtest.h"\n'
                                     '#include "local.h"\n')
        self.assertEqual(check_layering.check(self.src), [])

    def test_a_folder_without_deps_fails(self):
        write(self.src, "api/handler.cc", '#include "store/record.h"\n')
        problems = check_layering.check(self.src)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("api/: no DEPS file", problems[0])

    def test_a_deps_entry_that_is_no_folder_fails(self):
        write(self.src, "store/DEPS", "base\nplan\n")
        problems = check_layering.check(self.src)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("'plan'", problems[0])


if __name__ == "__main__":
    unittest.main()
