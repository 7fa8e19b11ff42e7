#!/usr/bin/env python3
"""make mutate: prove that the suite guards what matters (issue 8).

For each mutation in tools/mutate/mutations.toml (format: see tools/mutate/README.md), this
script copies the tree into a scratch source directory, applies the mutation there, builds the
targets the mutation names and runs the tests that should catch it. It prints one line per
mutation, then a total:

    caught    <name>  (<the tests that went red>)
    SURVIVED  <name>  (<why it matters>)

and exits 1 when any mutation survived (or broke, or a control did not behave as expected). The
working tree is only ever read.

Speed, on a 2-core machine: one scratch source path and one persistent build directory
(/tmp/codespace-mutate-src, /tmp/codespace-mutate-build). Between two mutations only the files
whose content changed are rewritten, so ninja recompiles one or two translation units and
relinks what depends on them. The scratch source directory is removed at exit (Ctrl-C included);
the build directory stays for the next `make mutate`, with a manifest of the content hash and
mtime of every source file it was last built from, so that a fresh copy of unchanged files gets
back the mtimes ninja already saw and nothing is rebuilt for them.

Trust: a mutation only counts as caught if the same tests pass on the unmutated tree (the
baseline, run first) and fail again when rerun (a flake is not a catch).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
DEFAULT_TIMEOUT = 300


class MutateError(Exception):
    """A problem with the list, the tree or the machine: nothing was judged."""


@dataclass
class Edit:
    file: str
    old: str
    new: str


@dataclass
class Mutation:
    name: str
    why: str
    tests: str = ""  # ctest -R regex
    label: str = ""  # ctest -L regex
    targets: list[str] = field(default_factory=lambda: ["all"])
    edits: list[Edit] = field(default_factory=list)
    expect: str = "caught"  # or "survive": a control
    pending: str = ""  # why it cannot be written yet; listed, not run
    wrap: list[str] = field(default_factory=list)  # argv prefix for ctest (a staged environment)
    timeout: int = DEFAULT_TIMEOUT


@dataclass
class Outcome:
    mutation: Mutation
    status: str  # caught | SURVIVED | survived | UNEXPECTED | BROKEN | pending | STALE
    detail: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("caught", "survived", "pending")


# --- the list ----------------------------------------------------------------------------------


def load_mutations(path: Path) -> list[Mutation]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MutateError(f"{path}: {e}") from e
    known = {"name", "why", "tests", "label", "targets", "edit", "expect", "pending", "wrap",
             "timeout"}
    out: list[Mutation] = []
    seen: set[str] = set()
    for i, m in enumerate(data.get("mutation", [])):
        where = f"{path}: mutation #{i + 1}"
        unknown = set(m) - known
        if unknown:
            raise MutateError(f"{where}: unknown keys {sorted(unknown)}")
        name = m.get("name", "")
        if not NAME_RE.match(name):
            raise MutateError(f"{where}: name {name!r} must match {NAME_RE.pattern}")
        if name in seen:
            raise MutateError(f"{where}: duplicate name {name}")
        seen.add(name)
        where = f"{path}: {name}"
        mut = Mutation(name=name, why=m.get("why", ""), tests=m.get("tests", ""),
                       label=m.get("label", ""), targets=m.get("targets", ["all"]),
                       expect=m.get("expect", "caught"), pending=m.get("pending", ""),
                       wrap=m.get("wrap", []), timeout=m.get("timeout", DEFAULT_TIMEOUT))
        if not mut.why:
            raise MutateError(f"{where}: `why` is required (what the mutation breaks)")
        if mut.expect not in ("caught", "survive"):
            raise MutateError(f"{where}: expect must be \"caught\" or \"survive\"")
        for e in m.get("edit", []):
            if set(e) != {"file", "old", "new"}:
                raise MutateError(f"{where}: each [[mutation.edit]] needs exactly file, old, new")
            if e["old"] == e["new"]:
                raise MutateError(f"{where}: an edit of {e['file']} changes nothing")
            mut.edits.append(Edit(e["file"], e["old"], e["new"]))
        if not mut.pending:
            if not mut.edits:
                raise MutateError(f"{where}: no [[mutation.edit]] (mark it pending = \"...\")")
            if not mut.tests and not mut.label:
                raise MutateError(f"{where}: say which tests catch it (tests or label)")
        out.append(mut)
    if not out:
        raise MutateError(f"{path}: no [[mutation]] entries")
    return out


# --- the tree ----------------------------------------------------------------------------------

Tree = dict[str, tuple[bytes, int]]  # path -> (content, mode bits)


def git(repo: Path, *args: str) -> bytes:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if r.returncode != 0:
        raise MutateError(f"git {' '.join(args)}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def snapshot_worktree(repo: Path) -> Tree:
    """Tracked files as they are in the working tree, plus untracked files git does not ignore
    (a new source file a CMakeLists.txt already names would otherwise be missing)."""
    names = git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    tree: Tree = {}
    for raw in names.split(b"\0"):
        if not raw:
            continue
        rel = raw.decode()
        p = repo / rel
        if p.is_symlink() or not p.is_file():
            continue  # deleted in the working tree, or a submodule / symlink (none here)
        tree[rel] = (p.read_bytes(), p.stat().st_mode & 0o777)
    return tree


def snapshot_head(repo: Path) -> Tree:
    tree: Tree = {}
    with tarfile.open(fileobj=io.BytesIO(git(repo, "archive", "--format=tar", "HEAD"))) as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                tree[member.name] = (data, member.mode & 0o777)
    return tree


def apply_edits(tree: Tree, mut: Mutation) -> Tree:
    """The tree with the mutation applied; MutateError if an old text is not there exactly once."""
    out = dict(tree)
    for e in mut.edits:
        if e.file not in out:
            raise MutateError(f"{mut.name}: {e.file} is not in the tree")
        data, mode = out[e.file]
        text = data.decode()
        n = text.count(e.old)
        if n != 1:
            first = e.old.strip().splitlines()[0] if e.old.strip() else e.old
            raise MutateError(
                f"{mut.name}: stale mutation: the old text is found {n} times (not exactly once) "
                f"in {e.file}: {first!r}")
        out[e.file] = (text.replace(e.old, e.new).encode(), mode)
    return out


class Scratch:
    """The scratch source directory, kept in step with a Tree by rewriting changed files only."""

    def __init__(self, src: Path, build: Path):
        self.src = src
        self.manifest_path = build / ".mutate-sources.json"
        try:
            self.manifest: dict[str, list] = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError):
            self.manifest = {}

    def sync(self, tree: Tree) -> list[str]:
        changed: list[str] = []
        self.src.mkdir(parents=True, exist_ok=True)
        for rel in list(self.manifest):
            if rel not in tree:
                (self.src / rel).unlink(missing_ok=True)
                del self.manifest[rel]
        for rel, (data, mode) in tree.items():
            digest = hashlib.sha256(data).hexdigest()
            dest = self.src / rel
            known = self.manifest.get(rel)
            if dest.is_file() and dest.read_bytes() == data:
                if known is None or known[0] != digest:
                    self.manifest[rel] = [digest, dest.stat().st_mtime_ns]
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".mutate-tmp")
            tmp.write_bytes(data)
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
            if known is not None and known[0] == digest:
                # The content the build last saw, at the mtime it saw: nothing to rebuild.
                os.utime(dest, ns=(known[1], known[1]))
            else:
                changed.append(rel)
                self.manifest[rel] = [digest, dest.stat().st_mtime_ns]
        self.manifest_path.parent.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(json.dumps(self.manifest, indent=0, sort_keys=True))
        return changed

    def remove(self) -> None:
        shutil.rmtree(self.src, ignore_errors=True)


# --- processes ---------------------------------------------------------------------------------

_children: set[subprocess.Popen] = set()


def run(argv: list[str], log: Path, timeout: float | None = None, cwd: Path | None = None) -> int:
    """Runs argv with its output appended to `log`; its own process group, so that an interrupt
    of make mutate ends it (and only it)."""
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                             start_new_session=True)
        _children.add(p)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_child(p)
            out.write(b"\n[make mutate: timed out]\n")
            return 124
        finally:
            _children.discard(p)


def stop_child(p: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


# --- build and test ----------------------------------------------------------------------------


class Bench:
    def __init__(self, src: Path, build: Path, jobs: int, logs: Path):
        self.src, self.build, self.jobs, self.logs = src, build, jobs, logs

    def configure(self, log: Path) -> None:
        cache = self.build / "CMakeCache.txt"
        if cache.exists():
            home = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(), re.M)
            if home and Path(home.group(1)) == self.src and (self.build / "build.ninja").exists():
                return  # ninja reruns cmake itself when a CMakeLists.txt changes
            shutil.rmtree(self.build)  # configured for another source path: start over
            self.build.mkdir(parents=True)
        # The preset's build type, without debug info: the same code as `make test`, linked faster.
        rc = run(["cmake", "-S", str(self.src), "-B", str(self.build), "-G", "Ninja",
                  "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"], log)
        if rc != 0:
            raise MutateError(f"cmake configure failed; see {log}")

    def compile(self, targets: list[str], log: Path) -> bool:
        argv = ["cmake", "--build", str(self.build), "-j", str(self.jobs)]
        if targets and targets != ["all"]:
            argv += ["--target", *targets]
        return run(argv, log) == 0

    def select(self, muts: list[Mutation]) -> list[int]:
        """The ctest numbers of the tests any of `muts` selects (ctest's -R/-L are searches)."""
        out = subprocess.run(["ctest", "--test-dir", str(self.build), "-N",
                              "--show-only=json-v1"], capture_output=True, text=True)
        if out.returncode != 0:
            raise MutateError(f"ctest -N: {out.stderr.strip()}")
        numbers = []
        for n, test in enumerate(json.loads(out.stdout).get("tests", []), 1):
            labels = []
            for prop in test.get("properties", []):
                if prop.get("name") == "LABELS":
                    labels = prop.get("value", [])
            for m in muts:
                if m.tests and not re.search(m.tests, test["name"]):
                    continue
                if m.label and not any(re.search(m.label, lb) for lb in labels):
                    continue
                numbers.append(n)
                break
        return numbers

    def ctest(self, mut: Mutation, select: list[str] | None, log: Path,
              tag: str) -> tuple[int, dict]:
        """Runs the mutation's tests (or the `select` ctest arguments); returns (count,
        {test: passed})."""
        junit = self.logs / f"{mut.name}.{tag}.xml"
        junit.unlink(missing_ok=True)
        argv = ["ctest", "--test-dir", str(self.build), "-j", str(self.jobs), "--timeout",
                str(mut.timeout), "--no-tests=error", "--output-on-failure", "--output-junit",
                str(junit),
                # Only the tests named: not the suite's fixture cleanups (nothing_left_on_the_machine
                # checks the whole machine, where other work may be running).
                "--fixture-exclude-cleanup", ".*"]
        if select is not None:
            argv += select
        else:
            if mut.tests:
                argv += ["-R", mut.tests]
            if mut.label:
                argv += ["-L", mut.label]
        rc = run(mut.wrap + argv, log, timeout=mut.timeout * 4 + 600)
        results: dict[str, bool] = {}
        try:
            for case in ET.parse(junit).getroot().iter("testcase"):
                status = case.get("status", "run")
                failed = status == "fail" or case.find("failure") is not None
                if status in ("disabled", "notrun") and not failed:
                    continue
                results[case.get("name", "?")] = not failed
        except (OSError, ET.ParseError):
            pass
        if rc != 0 and not results:
            raise MutateError(f"{mut.name}: ctest ran nothing (no test matched?); see {log}")
        if rc != 0 and all(results.values()):
            # ctest failed, but no test did: count what cannot be explained as red, by name.
            results["(ctest exited " + str(rc) + ")"] = False
        return len(results), results


def exact(names: list[str]) -> str:
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def short_list(names: list[str], limit: int = 3) -> str:
    # gtest_discover_tests names a parameterized test "Suite.Test/Param  # GetParam() = ...".
    names = sorted(n.split("  # ")[0] for n in names)
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def judge(bench: Bench, scratch: Scratch, base: Tree, mut: Mutation) -> Outcome:
    log = bench.logs / f"{mut.name}.log"
    log.unlink(missing_ok=True)
    started = time.monotonic()
    changed = scratch.sync(apply_edits(base, mut))
    with open(log, "a") as f:
        f.write(f"mutation {mut.name}: {mut.why}\nrewritten: {', '.join(changed) or '(none)'}\n")
    if not bench.compile(mut.targets, log):
        return Outcome(mut, "BROKEN", f"the mutant does not build; see {log}",
                       time.monotonic() - started)
    _, results = bench.ctest(mut, None, log, "run")
    red = [n for n, ok in results.items() if not ok]
    confirmed = confirm_red(bench, mut, results, log, "rerun") if red else []
    seconds = time.monotonic() - started
    flaky = sorted(set(red) - set(confirmed))
    note = f"; flaky, not counted: {short_list(flaky)}" if flaky else ""
    if mut.expect == "survive":
        if confirmed:
            return Outcome(mut, "UNEXPECTED",
                           f"a control went red: {short_list(confirmed)}; see {log}", seconds)
        return Outcome(mut, "survived", f"as expected: {mut.why}{note}", seconds)
    if confirmed:
        return Outcome(mut, "caught", short_list(confirmed) + note, seconds)
    return Outcome(mut, "SURVIVED", f"{mut.why}{note}; see {log}", seconds)


def confirm_red(bench: Bench, mut: Mutation, results: dict, log: Path, tag: str) -> list[str]:
    """The tests that went red and go red again when run alone (a flake is not a catch)."""
    red = [n for n, ok in results.items() if not ok]
    real = [n for n in red if not n.startswith("(")]
    if not real:
        return red
    _, again = bench.ctest(mut, ["-R", exact(real)], log, tag)
    return [n for n in real if again.get(n) is False]


def baseline(bench: Bench, scratch: Scratch, base: Tree, muts: list[Mutation]) -> None:
    """The unmutated tree must build and pass every test any mutation relies on, in every staged
    environment a mutation uses: otherwise a red test would prove nothing."""
    log = bench.logs / "baseline.log"
    log.unlink(missing_ok=True)
    scratch.sync(base)
    bench.configure(log)
    print(f"[baseline] building everything in {bench.build}", file=sys.stderr, flush=True)
    if not bench.compile(["all"], log):
        raise MutateError(f"the unmutated tree does not build; see {log}")
    groups: dict[tuple[str, ...], list[Mutation]] = {}
    for m in muts:
        groups.setdefault(tuple(m.wrap), []).append(m)
    for wrap, group in groups.items():
        probe = Mutation(name="baseline", why="baseline", wrap=list(wrap),
                         timeout=max(m.timeout for m in group))
        # One ctest run for the union of every selection (a ctest -R regex this long would
        # exceed CMake's regex limits): the tests are picked here, and passed by number.
        numbers = bench.select(group)
        where = f" under {' '.join(wrap)}" if wrap else ""
        if not numbers:
            raise MutateError(f"no test matches the mutations' selections{where}")
        listing = bench.logs / "baseline-tests.txt"
        listing.write_text("0,0,0," + ",".join(str(n) for n in numbers) + "\n")
        print(f"[baseline] the {len(numbers)} tests the mutations name{where}", file=sys.stderr,
              flush=True)
        _, results = bench.ctest(probe, ["-I", str(listing)], log, "baseline")
        still = confirm_red(bench, probe, results, log, "baseline-rerun")
        if still:
            raise MutateError(
                f"the unmutated tree fails {short_list(still, 6)}{where}; see {log}")


# --- main --------------------------------------------------------------------------------------


def main() -> int:
    here = Path(__file__).resolve().parent
    repo = Path(git(here, "rev-parse", "--show-toplevel").decode().strip())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", type=Path, default=here / "mutations.toml",
                    help="the mutation list (default: %(default)s)")
    ap.add_argument("--only", default="", help="run only mutations whose name matches this regex")
    ap.add_argument("--from-head", action="store_true",
                    help="mutate HEAD instead of the working tree (when it is mid-edit)")
    ap.add_argument("--src", type=Path, default=Path("/tmp/codespace-mutate-src"))
    ap.add_argument("--build", type=Path, default=Path(
        os.environ.get("MUTATE_BUILD_DIR", "/tmp/codespace-mutate-build")))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutation applies exactly, then exit")
    ap.add_argument("--skip-baseline", action="store_true",
                    help="trust that the unmutated tree passes (faster; catches are then unproven)")
    args = ap.parse_args()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    muts = load_mutations(args.list)
    if args.only:
        muts = [m for m in muts if re.search(args.only, m.name)]
        if not muts:
            raise MutateError(f"no mutation matches --only {args.only!r}")
    base = snapshot_head(repo) if args.from_head else snapshot_worktree(repo)
    # Fail loudly, before spending anything, on every mutation whose old text is gone or doubled.
    stale = []
    for m in muts:
        if m.pending:
            continue
        try:
            apply_edits(base, m)
        except MutateError as e:
            stale.append(str(e))
    if stale:
        raise MutateError("stale mutations (update tools/mutate/mutations.toml):\n  " +
                          "\n  ".join(stale))
    active = [m for m in muts if not m.pending]
    if args.check:
        print(f"mutate: {len(active)} mutations apply exactly; {len(muts) - len(active)} pending")
        return 0

    args.build.mkdir(parents=True, exist_ok=True)
    lock = open(args.build / ".mutate.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise MutateError(f"another make mutate is using {args.build}") from None
    logs = args.build / "mutate-logs"
    logs.mkdir(exist_ok=True)
    scratch = Scratch(args.src, args.build)
    bench = Bench(args.src, args.build, args.jobs, logs)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    interrupted = ""
    try:
        if active and not args.skip_baseline:
            baseline(bench, scratch, base, active)
        for i, m in enumerate(muts, 1):
            if m.pending:
                note = m.pending
                if m.edits:
                    try:
                        apply_edits(base, m)
                        note += " [its candidate edit applies]"
                    except MutateError as e:
                        note += f" [its candidate edit is stale: {e}]"
                o = Outcome(m, "pending", note)
            else:
                print(f"[{i}/{len(muts)}] {m.name}", file=sys.stderr, flush=True)
                o = judge(bench, scratch, base, m)
            outcomes.append(o)
            print(f"{o.status:<9} {o.mutation.name}  ({o.detail})", flush=True)
    except Interrupted as e:
        interrupted = str(e)
    finally:
        for p in list(_children):
            stop_child(p)
        scratch.remove()

    width = max((len(o.mutation.name) for o in outcomes), default=0)
    print("\n== make mutate ==")
    for o in outcomes:
        print(f"{o.status:<9} {o.mutation.name:<{width}}  ({o.detail})")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    order = ["caught", "SURVIVED", "survived", "UNEXPECTED", "BROKEN", "pending"]
    parts = [f"{counts[s]} {s if s != 'survived' else 'controls survived as expected'}"
             for s in order if counts.get(s)]
    elapsed = int(time.monotonic() - started)
    print(f"total: {len(outcomes)} of {len(muts)} mutations: {', '.join(parts) or 'none judged'} "
          f"in {elapsed // 60}m{elapsed % 60:02d}s (logs: {logs})")
    if interrupted:
        print(f"make mutate: interrupted ({interrupted}); scratch tree removed. A lane test "
              "killed mid-way may leave a /tmp/codespace-lane.* dir (its namespaces are removed "
              "by the next FakeInternet::Create)", file=sys.stderr)
        return 130
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MutateError as e:
        print(f"make mutate: {e}", file=sys.stderr)
        sys.exit(2)
    except Interrupted as e:  # before anything was started
        print(f"make mutate: interrupted ({e})", file=sys.stderr)
        sys.exit(130)
