#!/usr/bin/env python3
"""The layering check: no include runs back up the floors of src/.

Each folder of src/ has a DEPS file listing, one a line, the folders its files may include
from (in the spirit of Chromium's DEPS/checkdeps). A folder may always include its own files.
Every `#include "folder/..."` in a .h or .cc file is checked against its folder's list; angle
includes (<fmt/format.h>) and quoted paths whose first part is not a folder of src/ are not
ours and are not looked at. A folder with no DEPS file fails too: a new floor says where it is.

  check_layering.py [SRC_DIR]     exit 0 when clean; 1 and one line per upward include if not.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def read_deps(path):
    """The folders a DEPS file allows, in its order (comments and blank lines skipped)."""
    allowed = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word = line.split("#", 1)[0].strip()
            if word:
                allowed.append(word)
    return allowed


def check(src_dir):
    """The problems found under src_dir, one message each (empty when the layering holds)."""
    folders = sorted(d for d in os.listdir(src_dir) if os.path.isdir(os.path.join(src_dir, d)))
    problems = []
    deps = {}
    for folder in folders:
        deps_path = os.path.join(src_dir, folder, "DEPS")
        if not os.path.exists(deps_path):
            problems.append(f"{src_dir}/{folder}/: no DEPS file saying which folders it may include")
            continue
        deps[folder] = read_deps(deps_path)
        for name in deps[folder]:
            if name not in folders:
                problems.append(f"{deps_path}: names {name!r}, which is not a folder of {src_dir}")
    for folder in sorted(deps):
        allowed = set(deps[folder]) | {folder}
        for root, _, files in os.walk(os.path.join(src_dir, folder)):
            for file in sorted(files):
                if not file.endswith((".h", ".cc")):
                    continue
                path = os.path.join(root, file)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for included in INCLUDE.findall(text):
                    top = included.split("/", 1)[0]
                    if "/" not in included or top not in folders or top in allowed:
                        continue
                    problems.append(
                        f'{path} includes "{included}" ({src_dir}/{included}): {folder}/ may not '
                        f"include from {top}/ (its DEPS allows: {', '.join(deps[folder]) or 'nothing'})")
    return problems


def main(argv):
    src_dir = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "src")
    src_dir = os.path.normpath(src_dir)
    problems = check(src_dir)
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} problem(s); move the code to its floor, or (if the arrow "
              "points down) add the folder to the DEPS file")
        return 1
    print(f"layering: every include of {src_dir} points down its floors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
