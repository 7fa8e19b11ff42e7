#!/usr/bin/env python3
"""`make bench`: codespace side by side with its baselines, measured in the same run.

Every figure is the median of repeated runs; codespace and its baseline alternate (A B B A ...)
so that drift on a shared machine hits both alike. Prints a table and writes JSON.

Network safety: nothing here reaches the machine's network. The benchmark first builds a fake
internet of its own -- a "worker host" namespace whose only link is a veth to an "internet"
namespace (listeners on 203.0.113.10 and .20, port 7; no route anywhere else) -- and moves itself
into the worker host; every command it starts (codespace, bwrap, srt, socat, ip, nft) runs there.
Everything it makes (namespaces, veths, nftables tables, processes, temp dirs) is removed on exit,
also on failure or Ctrl-C.

Needs root (namespaces, nftables), bwrap, ip, nft, nsenter, socat; a release build
(build-release/), bench/relay_bench, and srt under build-release/srt (the Makefile sees to these).
"""

import argparse
import glob
import ctypes
import datetime
import json
import fcntl
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GIB = 1 << 30
CLONE_NEWNET = 0x40000000
ALLOWED = "203.0.113.10"  # listener in the fake internet; the allowlisted address
DENIED = "203.0.113.20"  # listener in the fake internet; never allowlisted
DNS = "203.0.113.53"  # CODESPACE_DNS_UPSTREAM (no run here asks it anything)


class BenchError(Exception):
    pass


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Cleanup: one stack, run in reverse, each step on its own (one failing does not skip the rest).


class Cleanup:
    def __init__(self):
        self.steps = []

    def push(self, what, fn):
        self.steps.append((what, fn))

    def run(self):
        while self.steps:
            what, fn = self.steps.pop()
            try:
                fn()
            except Exception as e:  # keep going: the next step may still remove something
                log(f"cleanup: {what}: {e}")


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


# ------------------------------------------------------------------------------------------------
# Processes: posix_spawn and wait4, the same thin path for codespace and its baselines.


def sh(argv, check=True, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {r.returncode}: {r.stdout.strip()}")
    return r


class Ctx:
    """What every measurement needs: paths, environment, scratch files."""

    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.ws = os.path.join(tmp, "ws")
        self.state = os.path.join(tmp, "state")
        self.errfile = os.path.join(tmp, "stderr.last")
        self.codespace = os.path.join(args.build, "codespace")
        self.env = dict(os.environ)
        self.env["CODESPACE_STATE_DIR"] = self.state
        self.env["CODESPACE_DNS_UPSTREAM"] = DNS
        self.env.pop("CODESPACE_BWRAP_PATH", None)
        self.bwrap = shutil.which("bwrap")
        self.bwrap_severed = None  # codespace's argv for a severed `true`, minus init and info-fd
        self.results = []  # table rows
        self.raw = {}  # samples, for the JSON

    def cs(self, *a, state=None, quiet=False):
        argv = [self.codespace] + (["-q"] if quiet else [])
        if state:
            argv += ["--state-dir", state]
        return argv + list(a)


LIVE = set()  # pids spawned and not yet reaped: stopped by the cleanup if we are interrupted


def stop_live():
    for pid in list(LIVE):
        try:
            os.kill(pid, signal.SIGTERM)  # the by-hand script tears its network down on TERM
        except OSError:
            LIVE.discard(pid)
    deadline = time.time() + 10
    while LIVE and time.time() < deadline:
        for pid in list(LIVE):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    LIVE.discard(pid)
            except ChildProcessError:
                LIVE.discard(pid)
        time.sleep(0.02)
    for pid in list(LIVE):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        LIVE.discard(pid)


def reap(pid):
    _, status, ru = os.wait4(pid, 0)
    LIVE.discard(pid)
    return status, ru


def spawn(argv, env, out="/dev/null", err=None, opens=()):
    """posix_spawn with stdout to `out` and stderr to `err` (a file); returns the pid. `opens`:
    (fd, path) pairs opened read-only in the child (bwrap's --seccomp FD)."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    actions += [(os.POSIX_SPAWN_OPEN, fd, path, os.O_RDONLY, 0) for fd, path in opens]
    if err:
        actions.append((os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    path = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if not path:
        raise BenchError(f"{argv[0]}: not found")
    pid = os.posix_spawn(path, argv, env, file_actions=actions)
    LIVE.add(pid)
    return pid


def run_timed(ctx, argv, env=None, out="/dev/null", expect=0, hwm=False, opens=()):
    """Seconds from spawn to exit, and (hwm=True) the child's peak RSS in KiB, sampled from
    /proc/<pid>/status every 20 ms (ru_maxrss would report this process's own peak: a child
    spawned with vfork inherits it until exec)."""
    env = env or ctx.env
    t0 = time.perf_counter()
    pid = spawn(argv, env, out, ctx.errfile, opens)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            v = vm_hwm_kb(pid)
            if v:
                peak[0] = max(peak[0], v)

    sampler = threading.Thread(target=sample, daemon=True) if hwm else None
    if sampler:
        sampler.start()
    status, ru = reap(pid)
    t1 = time.perf_counter()
    done.set()
    if sampler:
        sampler.join()
    rc = os.waitstatus_to_exitcode(status)
    if expect is not None and rc != expect:
        with open(ctx.errfile, errors="replace") as f:
            err = f.read().strip()[-2000:]
        raise BenchError(f"{' '.join(argv[:8])}...: exit {rc} (wanted {expect}): {err}")
    return t1 - t0, peak[0]


def burst(ctx, argvs, env=None):
    """Starts every argv at once; returns [(seconds from the first spawn to this one's spawn,
    seconds to its exit, exit code, max RSS KiB)] and the total wall time."""
    env = env or ctx.env
    procs = {}
    t0 = time.perf_counter()
    try:
        for i, argv in enumerate(argvs):
            pid = spawn(argv, env, "/dev/null", f"{ctx.errfile}.{i}")
            fd = os.pidfd_open(pid)
            procs[fd] = (i, pid, time.perf_counter())
        results = [None] * len(argvs)
        poller = select.poll()
        for fd in procs:
            poller.register(fd, select.POLLIN)
        left = len(procs)
        while left:
            for fd, _ in poller.poll():
                i, pid, ts = procs[fd]
                status, ru = reap(pid)
                te = time.perf_counter()
                poller.unregister(fd)
                os.close(fd)
                results[i] = (ts - t0, te - ts, os.waitstatus_to_exitcode(status), ru.ru_maxrss)
                left -= 1
        procs = {}
    finally:
        for fd in procs:  # interrupted: the cleanup stops what is still running (LIVE)
            os.close(fd)
    total = max(r[0] + r[1] for r in results)
    bad = [(i, r[2]) for i, r in enumerate(results) if r[2] != 0]
    if bad:
        i = bad[0][0]
        with open(f"{ctx.errfile}.{i}", errors="replace") as f:
            raise BenchError(f"{len(bad)} of {len(argvs)} failed; #{i} exit {bad[0][1]}: "
                             f"{f.read().strip()[-1000:]}")
    return results, total


def alternate(n, a, b, warmup=2):
    """Runs a() and b() n times each, alternating which goes first; returns both sample lists."""
    for _ in range(warmup):
        a()
        b()
    sa, sb = [], []
    for i in range(n):
        if i % 2 == 0:
            sa.append(a())
            sb.append(b())
        else:
            sb.append(b())
            sa.append(a())
    return sa, sb


def med(xs):
    return statistics.median(xs)


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def row(ctx, item, what, cs, base_name, base, unit, aim=None, higher_is_better=False, n=None,
        note=""):
    """One table row: medians (or single values) of codespace and its baseline, their ratio."""
    ratio = (cs / base) if (cs is not None and base) else None
    met = None
    if aim is not None and ratio is not None:
        met = ratio >= aim if higher_is_better else ratio <= aim
    r = {"item": item, "what": what, "codespace": cs, "baseline_name": base_name,
         "baseline": base, "unit": unit, "ratio": ratio, "n": n, "note": note,
         "aim": (f">= {aim}" if higher_is_better else f"<= {aim}") if aim is not None else None,
         "met": met}
    ctx.results.append(r)
    return r


# ------------------------------------------------------------------------------------------------
# The fake internet: a worker host wired only to an internet namespace.


def setns(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise BenchError(f"setns({path}, CLONE_NEWNET): {os.strerror(e)}")
    finally:
        os.close(fd)


def build_fake_internet(ctx, cleanup):
    tag = f"csb-{os.getpid()}"
    w, i = f"{tag}-w", f"{tag}-i"
    ctx.worker_ns, ctx.internet_ns = w, i
    for ns in (w, i):
        sh(["ip", "netns", "add", ns])
        cleanup.push(f"delete namespace {ns}", lambda ns=ns: sh(["ip", "netns", "del", ns]))
    # The veth is made inside the worker host and its peer sent straight to the internet: no
    # veth ever exists in the machine's own namespace.
    sh(["ip", "-n", w, "link", "add", "uplink0", "type", "veth", "peer", "name", "fi0",
        "netns", i])
    for cmd in (
        ["ip", "-n", w, "link", "set", "lo", "up"],
        ["ip", "-n", w, "addr", "add", "198.51.100.2/24", "dev", "uplink0"],
        ["ip", "-n", w, "link", "set", "uplink0", "up"],
        ["ip", "-n", w, "route", "add", "default", "via", "198.51.100.1"],
        ["ip", "-n", i, "link", "set", "lo", "up"],
        ["ip", "-n", i, "addr", "add", "198.51.100.1/24", "dev", "fi0"],
        ["ip", "-n", i, "link", "set", "fi0", "up"],
        ["ip", "-n", i, "addr", "add", f"{ALLOWED}/32", "dev", "lo"],
        ["ip", "-n", i, "addr", "add", f"{DENIED}/32", "dev", "lo"],
        ["ip", "-n", i, "addr", "add", f"{DNS}/32", "dev", "lo"],
    ):
        sh(cmd)
    # A listener on the fake internet's servers: TCP echo on port 7, every address.
    socat = shutil.which("socat")
    lst = subprocess.Popen(["nsenter", f"--net=/run/netns/{i}", socat,
                            "TCP-LISTEN:7,reuseaddr,fork", "PIPE"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    cleanup.push("stop the fake internet's listener", lambda: (lst.kill(), lst.wait()))
    # From here on this process (and all it starts) lives in the worker host.
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    cleanup.push("leave the worker host", lambda: (setns(f"/proc/self/fd/{home}"), os.close(home)))
    setns(f"/run/netns/{w}")
    # Forwarding on in the worker host (a filtered run's NAT needs it); read back, not trusted.
    with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
        f.write("1\n")
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        if f.read().strip() != "1":
            raise BenchError("worker host: ip_forward does not read 1 after writing it")
    routes = sh(["ip", "-4", "route"]).stdout
    if "default via 198.51.100.1 dev uplink0" not in routes:
        raise BenchError(f"worker host routes are not what was built: {routes}")
    # Wait for the listener (socat starts in a moment).
    for _ in range(200):
        if sh(["bash", "-c", f"exec 3<>/dev/tcp/{ALLOWED}/7"], check=False).returncode == 0:
            break
        time.sleep(0.01)
    else:
        raise BenchError("the fake internet's listener does not answer")


def sweep_our_runs(ctx):
    """After an interruption: stop supervisors still alive, remove their run namespaces. (Their
    veths and NAT tables live in the worker host, which goes as a whole.)"""
    states = [os.path.join(ctx.tmp, d) for d in os.listdir(ctx.tmp) if d.startswith("state")]
    sups = []
    for runs_dir in [os.path.join(s, "runs") for s in states]:
        if not os.path.isdir(runs_dir):
            continue
        for rid in os.listdir(runs_dir):
            d = os.path.join(runs_dir, rid)
            if os.path.exists(os.path.join(d, "status.json")):
                continue
            try:
                pid, start = open(os.path.join(d, "supervisor")).read().split()[:2]
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[19] != start:
                        continue
                os.kill(int(pid), signal.SIGTERM)
                sups.append(int(pid))
            except (OSError, ValueError, IndexError):
                continue
    deadline = time.time() + 10
    while sups and time.time() < deadline:
        sups = [p for p in sups if os.path.exists(f"/proc/{p}")]
        time.sleep(0.05)
    for p in sups:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    names = set()
    for state in states:
        r = sh([ctx.codespace, "--state-dir", state, "runs", "--json", "--limit", "100000"],
               check=False, env=ctx.env)
        try:
            names |= {x.get("namespace") for x in json.loads(r.stdout)} - {"", None}
        except ValueError:
            pass
    # The by-hand baseline's namespaces, should a script have been killed before its teardown.
    names |= {n for n in os.listdir("/run/netns")
              if n.startswith(f"{ctx.worker_ns}-r") or n.startswith(f"{ctx.worker_ns}-c")}
    for name in names:
        if os.path.exists(f"/run/netns/{name}"):
            sh(["ip", "netns", "del", name], check=False)
        shutil.rmtree(f"/run/codespace/{name}", ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# Items.


def capture_bwrap_argv(ctx):
    """The bubblewrap argv codespace uses for a severed run of `true`, read off a real run through
    a logging wrapper (CODESPACE_BWRAP_PATH), minus what only codespace needs (its init, bound in
    /dev, and the info fd); the command becomes plain `true`."""
    logdir = os.path.join(ctx.tmp, "argv")
    os.makedirs(logdir)
    wrapper = os.path.join(ctx.tmp, "bwrap-logging")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/bash\nprintf '%s\\0' \"$@\" > {logdir}/$$\nexec {ctx.bwrap} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    env = dict(ctx.env, CODESPACE_BWRAP_PATH=wrapper)
    run_timed(ctx, ctx.cs("run", "-q", "--egress", "none", "--workspace", ctx.ws, "--", "true"),
              env=env)
    argv = None
    for name in os.listdir(logdir):
        a = open(os.path.join(logdir, name)).read().split("\0")[:-1]
        if "/dev/.codespace-init" in a:
            argv = a
    if not argv:
        raise BenchError("could not read codespace's bwrap argv (no run with its init)")
    out, i = [ctx.bwrap], 0
    while i < len(argv):
        a = argv[i]
        if a == "--ro-bind" and argv[i + 2] == "/dev/.codespace-init":
            i += 3
        elif a in ("--info-fd", "--seccomp"):  # the filter's cost is item 7's
            i += 2
        elif a == "--":
            break
        else:
            out.append(a)
            i += 1
    ctx.bwrap_flags = out  # up to, not including, "--"
    ctx.bwrap_severed = out + ["--", "true"]
    ctx.raw["bwrap_argv_codespace"] = argv
    ctx.raw["bwrap_argv_baseline"] = ctx.bwrap_severed
    shutil.rmtree(logdir)


def item1_severed(ctx):
    n = ctx.args.n
    cs = ctx.cs("run", "-q", "--egress", "none", "--workspace", ctx.ws, "--", "true")
    a, b = alternate(n, lambda: run_timed(ctx, cs)[0],
                     lambda: run_timed(ctx, ctx.bwrap_severed)[0])
    ctx.raw["1_run_s"], ctx.raw["1_bwrap_s"] = a, b
    row(ctx, "1", "severed `true`: codespace run", med(a) * 1e3, "bwrap, same flags",
        med(b) * 1e3, "ms", aim=1.3, n=n, note="probes remembered in the state dir (a warm-up run made them); supervisor forked, "
             "not exec'd; returns once status.json is written")


def item7_identity(ctx):
    """A root worker's run is a leased uid of its own, its workspace an idmapped mount: the
    mount's cost does not depend on how many files the workspace holds (no chown walk)."""
    n = ctx.args.n
    wss = {}
    for count in (10, 100000):
        d = os.path.join(ctx.tmp, f"ws-{count}")
        for i in range(count):
            sub = os.path.join(d, f"d{i // 1000}")
            if i % 1000 == 0:
                os.makedirs(sub, exist_ok=True)
            open(os.path.join(sub, f"f{i}"), "w").close()
        wss[count] = d
    def one(count):
        return run_timed(ctx, ctx.cs("run", "-q", "--egress", "none", "--workspace", wss[count],
                                     "--", "true"))[0]
    big, small = alternate(n, lambda: one(100000), lambda: one(10))
    ctx.raw["7_100000_s"], ctx.raw["7_10_s"] = big, small
    row(ctx, "7", "severed `true`, idmapped workspace of 100,000 files", med(big) * 1e3,
        "the same, 10 files", med(small) * 1e3, "ms", aim=1.1, n=n,
        note="uid lease, lease dir, user-namespace helper, open_tree + mount_setattr(IDMAP) "
             "+ move_mount: O(1) in the workspace's size")


def item8_cpu_limit(ctx):
    """A CPU spinner for 5 s with --cpus 0.5 beside the same spinner unlimited: CPU seconds
    (user + system, from the run's cgroup) over wall seconds, one run each. A ratio, not a
    timed test: with --cpus 0.5 it should read about 0.5, unlimited about 1 (one thread)."""
    spin = ["sh", "-c", "end=$(( $(date +%s) + 5 )); while [ $(date +%s) -lt $end ]; do :; done"]
    ratios = {}
    for label, flags in (("--cpus 0.5", ["--cpus", "0.5"]), ("unlimited", [])):
        t = time.time()
        sh(ctx.cs("run", "-q", "--workspace", ctx.ws, *flags, "--", *spin), env=ctx.env)
        wall = time.time() - t
        runs = json.loads(sh(ctx.cs("runs", "--json", "--limit", "1"), env=ctx.env).stdout)
        u = runs[0].get("usage") or {}
        cpu = ((u.get("cpu_user_usec") or 0) + (u.get("cpu_system_usec") or 0)) / 1e6
        ratios[label] = cpu / wall if wall > 0 else 0
        ctx.raw[f"8_cpu_ratio_{'limited' if flags else 'unlimited'}"] = ratios[label]
    row(ctx, "8", "CPU spinner 5 s, --cpus 0.5: cpu s / wall s", ratios["--cpus 0.5"],
        "the same spinner unlimited", ratios["unlimited"], "ratio", n=1,
        note="from the runs' cgroups (cpuacct.stat / cpu.stat); a ratio in one run, not a timing")


def item9_seccomp(ctx):
    """The syscall filter's cost: bubblewrap with codespace's flags and the same argv, with and
    without `--seccomp` of the very program codespace builds (`codespace seccomp --bpf`), in the
    same run. There is no switch that launches a codespace run unfiltered: the comparison is on
    bubblewrap, which codespace drives."""
    n = ctx.args.n
    bpf = os.path.join(ctx.tmp, "seccomp.bpf")
    sh(ctx.cs("seccomp", "--bpf", bpf))
    fd = 9
    filtered = ctx.bwrap_flags + ["--seccomp", str(fd), "--"]
    plain = ctx.bwrap_flags + ["--"]
    for what, cmd in (("`true`", ["true"]),
                      ("`dd bs=1 count=200000` (400k read+write)",
                       ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000",
                        "status=none"])):
        a, b = alternate(n, lambda: run_timed(ctx, filtered + cmd, opens=[(fd, bpf)])[0],
                         lambda: run_timed(ctx, plain + cmd)[0])
        ctx.raw[f"9_{cmd[0]}_filtered_s"], ctx.raw[f"9_{cmd[0]}_plain_s"] = a, b
        row(ctx, "9", f"severed {what}: bwrap + the run's seccomp filter", med(a) * 1e3,
            "bwrap, same flags, no filter", med(b) * 1e3, "ms", n=n,
            note=f"{os.path.getsize(bpf) // 8} BPF instructions")


def item1_srt(ctx):
    srt = ctx.args.srt
    if not os.path.exists(srt):
        row(ctx, "1", "severed `true`: vs srt", None, "srt", None, "ms",
            note=f"srt not installed at {srt}")
        return
    ws = os.path.join(ctx.tmp, "ws-srt")
    os.makedirs(ws)
    settings = os.path.join(ctx.tmp, "srt-settings.json")
    with open(settings, "w") as f:
        json.dump({"network": {"allowedDomains": ["allowed.test"], "deniedDomains": []},
                   "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}, f)
    argv = [srt, "--settings", settings, "true"]
    # As installed: srt on Linux needs ripgrep, which `make bench` installs from Debian. Run by
    # hand on a machine without it, srt is measured with `rg` standing in as a script that finds
    # nothing -- what real rg finds in this empty workspace -- so srt pays one exec less than it
    # would with the real one: its figure is then a lower bound, and its note says so.
    env = dict(ctx.env)
    note = ""
    probe = sh(argv, check=False, env=env, cwd=ws)
    if probe.returncode != 0:
        ctx.raw["srt_as_installed"] = {"exit": probe.returncode, "output": probe.stdout.strip()}
        if "ripgrep" not in probe.stdout:
            row(ctx, "1", "severed `true`: vs srt", None, "srt", None, "ms",
                note=f"srt cannot run here: {probe.stdout.strip()[:200]}")
            return
        stub = os.path.join(ctx.tmp, "rg-stub")
        os.makedirs(stub)
        with open(os.path.join(stub, "rg"), "w") as f:
            f.write("#!/bin/sh\n# stand-in for ripgrep: no matches\nexit 1\n")
        os.chmod(os.path.join(stub, "rg"), 0o755)
        env["PATH"] = stub + ":" + env.get("PATH", "")
        note = (f"srt as installed exits {probe.returncode}: "
                f"\"{probe.stdout.strip().splitlines()[0][:90]}\"; measured with a no-match `rg` "
                "stand-in (lower bound for srt)")
        check = sh(argv, check=False, env=env, cwd=ws)
        if check.returncode != 0:
            row(ctx, "1", "severed `true`: vs srt", None, "srt", None, "ms",
                note=f"srt cannot run here even with an `rg` stand-in: {check.stdout.strip()[:200]}")
            return

    def one_srt():
        os.chdir(ws)  # srt confines the current directory (its write path ".")
        try:
            return run_timed(ctx, argv, env=env)[0]
        finally:
            os.chdir(ctx.ws)

    cs = ctx.cs("run", "-q", "--egress", "none", "--workspace", ctx.ws, "--", "true")
    n = max(3, ctx.args.n // 2)
    a, b = alternate(n, lambda: run_timed(ctx, cs)[0], one_srt, warmup=1)
    ctx.raw["1_srt_s"], ctx.raw["1_run_vs_srt_s"] = b, a
    row(ctx, "1", "severed `true`: codespace run", med(a) * 1e3, "srt, 1 domain allowed",
        med(b) * 1e3, "ms", n=n, note=note)


def start_worker(ctx, state, quiet=True):
    """`codespace worker`, running; returns (Popen, seconds to its first stderr line, seconds to
    its ready line). A thread keeps reading its log so that it never blocks on a full pipe."""
    t0 = time.perf_counter()
    argv = ctx.cs("worker", state=state, quiet=quiet)
    p = subprocess.Popen(argv, env=ctx.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    lines = []
    ready = threading.Event()

    def read():
        for line in p.stderr:
            lines.append((time.perf_counter() - t0, line.decode(errors="replace")))
            if line.startswith(b"codespace worker: state dir"):
                ready.set()
        ready.set()  # EOF: it exited

    threading.Thread(target=read, daemon=True).start()
    ready.wait(60)
    ready_at = [t for t, line in lines if line.startswith("codespace worker: state dir")]
    if not ready_at:
        p.kill()
        p.wait()
        raise BenchError(f"codespace worker not ready: {''.join(l for _, l in lines)[-500:]}")
    p.log = lines
    return p, lines[0][0], ready_at[0]


def stop_worker(p):
    if p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def vm_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def show(ctx, rid, state=None):
    r = sh(ctx.cs("show", rid, "--json", state=state), env=ctx.env)
    return json.loads(r.stdout)


TERMINAL = {"exited", "aborted", "refused", "cancelled", "lost"}


def item1_worker(ctx, cleanup):
    state = os.path.join(ctx.tmp, "state-worker")
    p, _, _ = start_worker(ctx, state)
    cleanup.push("stop the worker (item 1)", lambda: stop_worker(p))
    submit = ctx.cs("submit", "--egress", "none", "--workspace", ctx.ws, "--", "true",
                    state=state, quiet=True)
    idfile = os.path.join(ctx.tmp, "submit.out")
    parts = {"submit": [], "queued": [], "supervised": []}

    def one():
        t0 = time.perf_counter()
        pid = spawn(submit, ctx.env, idfile, ctx.errfile)
        st, _ = reap(pid)
        t_sub = time.perf_counter()
        if os.waitstatus_to_exitcode(st) != 0:
            raise BenchError("codespace submit failed: " + open(ctx.errfile).read())
        rid = open(idfile).read().strip()
        while True:
            rec = show(ctx, rid, state)
            if rec["state"] in TERMINAL:
                break
            if p.poll() is not None:
                raise BenchError(f"the worker exited ({p.returncode}) with run {rid} in flight")
            time.sleep(0.002)
        t_end = time.perf_counter()
        if rec["state"] != "exited" or rec.get("exit_code") != 0:
            raise BenchError(f"run {rid} via the worker ended {rec['state']}: {rec['reason']}")
        parts["submit"].append(t_sub - t0)
        parts["queued"].append((rec["started_ms"] - rec["created_ms"]) / 1e3)
        parts["supervised"].append((rec["ended_ms"] - rec["started_ms"]) / 1e3)
        return t_end - t0

    n = ctx.args.n
    a, b = alternate(n, one, lambda: run_timed(ctx, ctx.bwrap_severed)[0])
    for k in parts:
        parts[k] = parts[k][-n:]  # without the warm-ups
    ctx.raw["1_worker_s"], ctx.raw["1_worker_bwrap_s"], ctx.raw["1_worker_parts_s"] = a, b, parts
    row(ctx, "1", "severed `true` via worker: submit → recorded end", med(a) * 1e3,
        "bwrap, same flags", med(b) * 1e3, "ms", n=n,
        note=f"of which: submit {med(parts['submit']) * 1e3:.1f} ms (through the worker's API), "
             f"queued {med(parts['queued']) * 1e3:.0f} ms (the API wakes the worker); the end is "
             "seen by polling `codespace show --json` (~6 ms a poll)")
    row(ctx, "1", "severed `true` via worker: record started → ended", med(parts["supervised"]) *
        1e3, "bwrap, same flags", med(b) * 1e3, "ms", aim=1.3, n=n,
        note="steady state: supervisor forked by the worker's spawner, bwrap + init, seal, status.json "
             "(1 ms clock)")
    stop_worker(p)


def wait_supervisors(state):
    """Until no supervisor holds a run directory of `state` (they tear filtered runs' networks
    down after `codespace run` has returned). Plain bubblewrap launched meanwhile does not take
    codespace's netns-mount lock, and a namespace removed during its setup fails it."""
    runs = os.path.join(state, "runs")
    for d in os.listdir(runs) if os.path.isdir(runs) else []:
        try:
            # The supervisor's lock is a POSIX record lock (fcntl), which flock() does not see.
            with open(os.path.join(runs, d, "supervisor.lock")) as f:
                fcntl.lockf(f, fcntl.LOCK_SH)
        except OSError:
            pass


def timed_then_settled(ctx, argv):
    """run_timed's seconds (until `codespace run` returns), then, untimed, its supervisor's
    teardown: the baseline that alternates with it must not start during that teardown."""
    t = run_timed(ctx, argv)[0]
    wait_supervisors(ctx.state)
    return t


def until_torn_down(ctx, argv):
    """Seconds from spawn until the run's supervisor is gone too (it tears a filtered run's
    network down after `codespace run` has returned)."""
    t0 = time.perf_counter()
    run_timed(ctx, argv)
    wait_supervisors(ctx.state)
    return time.perf_counter() - t0


def item2_filtered(ctx):
    cs = ctx.cs("run", "-q", "--egress", "allowlist", "--allow", ALLOWED, "--workspace", ctx.ws,
                "--", "true")
    # It is filtered, and the filter works: the allowlisted listener answers, the other not.
    probe = ("exec 3<>/dev/tcp/{}/7 && echo ping >&3 && read -t 2 line <&3 && echo $line")
    ok = sh(ctx.cs("run", "-q", "--egress", "allowlist", "--allow", f"{ALLOWED}:7",
                   "--workspace", ctx.ws, "--", "bash", "-c", probe.format(ALLOWED)),
            check=False, env=ctx.env)
    no = sh(ctx.cs("run", "-q", "--egress", "allowlist", "--allow", f"{ALLOWED}:7",
                   "--workspace", ctx.ws, "--", "timeout", "1", "bash", "-c",
                   probe.format(DENIED)), check=False, env=ctx.env)
    rec = show(ctx, "latest")
    if rec["network"] != "filtered":
        raise BenchError(f"an allowlist run here is {rec['network']} ({rec['reason']}), not "
                         "filtered: the filtered items would measure something else")
    if ok.returncode != 0 or "ping" not in ok.stdout or no.returncode == 0:
        raise BenchError(f"the filter does not behave: allowed -> {ok.returncode} {ok.stdout!r}, "
                         f"denied -> {no.returncode} {no.stdout!r}")
    ctx.raw["2_filter_check"] = {"allowed": ok.stdout.strip(), "denied_exit": no.returncode}

    n = ctx.args.n
    a, b = alternate(n, lambda: timed_then_settled(ctx, cs),
                     lambda: run_timed(ctx, ctx.bwrap_severed)[0])
    ctx.raw["2_run_s"], ctx.raw["2_bwrap_s"] = a, b
    row(ctx, "2", "filtered `true` (allow 1 address): codespace run", med(a) * 1e3,
        "bwrap severed", med(b) * 1e3, "ms", aim=3, n=n)

    script = os.path.join(HERE, "filtered_by_hand.sh")
    shared = [x for x in ctx.bwrap_flags if x != "--unshare-net"] + ["--", "true"]
    seq = iter(range(100000))

    def by_hand():
        k = next(seq)
        return run_timed(ctx, [script, f"{ctx.worker_ns}-r{k}", str(k % 16384), ALLOWED, "--"] +
                         shared)[0]

    a2, c = alternate(n, lambda: timed_then_settled(ctx, cs), by_hand)
    ctx.raw["2_run_vs_script_s"], ctx.raw["2_script_s"] = a2, c
    row(ctx, "2", "filtered `true`: codespace run", med(a2) * 1e3,
        "ip + nft + bwrap script", med(c) * 1e3, "ms", n=n,
        note="script: netns, veth, addrs, route, 2 nft tables, bwrap, teardown; no DNS gate. "
             "codespace returns once the run is recorded; its teardown follows")
    a3, c3 = alternate(n, lambda: until_torn_down(ctx, cs), by_hand)
    ctx.raw["2_run_with_teardown_s"], ctx.raw["2_script_again_s"] = a3, c3
    row(ctx, "2", "filtered `true`: codespace run + its teardown", med(a3) * 1e3,
        "ip + nft + bwrap script", med(c3) * 1e3, "ms", n=n,
        note="until the supervisor has torn the network down and exited")


def item4_logs(ctx, cleanup):
    reps = ctx.args.log_reps
    size = ctx.args.log_bytes
    cmd = ["head", "-c", str(size), "/dev/zero"]
    cs = ctx.cs("run", "-q", "--workspace", ctx.ws, "--") + cmd
    out = os.path.join(ctx.ws, "direct.out")
    direct = ctx.bwrap_flags + ["--", "sh", "-c", f"head -c {size} /dev/zero > {out}"]
    sup_rss, run_rss = [], []

    def one_cs():
        t, rss = run_timed(ctx, cs, hwm=True)
        rec = show(ctx, "latest")
        log_ = rec["logs"]["stdout"]
        if rec["state"] != "exited" or log_["bytes"] != size or not log_["sealed"]:
            raise BenchError(f"1 GiB run: {rec['state']}, stdout {log_}")
        d = os.path.join(ctx.state, "runs", rec["id"])
        st = json.load(open(os.path.join(d, "status.json")))
        sup_rss.append(st.get("supervisor_peak_rss_kb"))
        run_rss.append(rss)
        os.unlink(os.path.join(d, "stdout"))  # 1 GiB each: do not fill the disk
        return t

    def one_direct():
        t, _ = run_timed(ctx, direct)
        if os.path.getsize(out) != size:
            raise BenchError("direct write: wrong size")
        os.unlink(out)
        return t

    synced = ctx.bwrap_flags + ["--", "sh", "-c",
                                f"head -c {size} /dev/zero > {out} && sync {out}"]

    def one_synced():
        t, _ = run_timed(ctx, synced)
        os.unlink(out)
        return t

    a, b = alternate(reps, one_cs, one_direct, warmup=0)
    c = [one_synced() for _ in range(max(1, reps // 2))]
    ctx.raw["4_run_s"], ctx.raw["4_direct_s"], ctx.raw["4_direct_sync_s"] = a, b, c
    ctx.raw["4_supervisor_peak_rss_kb"], ctx.raw["4_run_maxrss_kb"] = sup_rss, run_rss
    mib = size / (1 << 20)
    row(ctx, "4", f"log capture {mib:.0f} MiB: codespace run → sealed log", med(a), "bwrap, > file",
        med(b), "s", aim=1.2, n=reps, note=f"{mib / med(a):.0f} vs {mib / med(b):.0f} MiB/s; "
        "sealed = sha256 + fsync; direct = page cache, no fsync")
    row(ctx, "4", f"log capture {mib:.0f} MiB: codespace run → sealed log", med(a),
        "bwrap, > file + sync", med(c), "s", n=len(c), note="the direct write made as durable")
    ctx.mem.update({"4_supervisor_peak_rss_kb": max(x for x in sup_rss if x is not None),
                    "4_run_process_maxrss_kb": max(run_rss)})

    # The same through the worker: its own peak while a 1 GiB log goes by.
    state = os.path.join(ctx.tmp, "state-log-worker")
    p, _, _ = start_worker(ctx, state)
    cleanup.push("stop the worker (item 4)", lambda: stop_worker(p))
    rid = sh(ctx.cs("submit", "--workspace", ctx.ws, "--", *cmd, state=state, quiet=True),
             env=ctx.env).stdout.strip()
    t0 = time.perf_counter()
    while show(ctx, rid, state)["state"] not in TERMINAL:
        time.sleep(0.05)
        if p.poll() is not None:
            raise BenchError(f"the worker exited ({p.returncode}) with run {rid} in flight")
        if time.perf_counter() - t0 > 300:
            raise BenchError("1 GiB run via the worker: not done in 300 s")
    rec = show(ctx, rid, state)
    st = json.load(open(os.path.join(state, "runs", rid, "status.json")))
    ctx.mem["4_worker_vmhwm_kb"] = vm_hwm_kb(p.pid)
    ctx.mem["4_worker_run_supervisor_peak_rss_kb"] = st.get("supervisor_peak_rss_kb")
    if rec["logs"]["stdout"]["bytes"] != size:
        raise BenchError(f"1 GiB run via the worker: {rec['logs']['stdout']}")
    os.unlink(os.path.join(state, "runs", rid, "stdout"))
    stop_worker(p)


def item5_concurrency(ctx, cleanup):
    k = ctx.args.concurrent
    rounds = ctx.args.concurrent_rounds
    cs = ctx.cs("run", "-q", "--egress", "allowlist", "--allow", ALLOWED, "--workspace", ctx.ws,
                "--", "true")
    lat_cs, lat_bw, wall_cs, wall_bw, lat_sc, wall_sc = [], [], [], [], [], []
    script = os.path.join(HERE, "filtered_by_hand.sh")
    shared = [x for x in ctx.bwrap_flags if x != "--unshare-net"] + ["--", "true"]
    for r in range(rounds):
        # The scripts only on request, and once (the middle round): 100 of them at once are some
        # 2000 processes and take ~45 s here, loading the machine for what follows.
        order = [0, 1] if r % 2 == 0 else [1, 0]
        if ctx.args.concurrent_scripts and r == rounds // 2:
            order = [0, 2, 1] if r % 2 == 0 else [1, 2, 0]
        for which in order:
            if which == 2:
                res, total = burst(ctx, [[script, f"{ctx.worker_ns}-c{j}", str(8000 + j), ALLOWED,
                                          "--"] + shared for j in range(k)])
                lat_sc += [x[1] for x in res]
                wall_sc.append(total)
                continue
            if which == 0:
                res, total = burst(ctx, [cs] * k)
                lat_cs += [x[1] for x in res]
                wall_cs.append(total)
                wait_supervisors(ctx.state)  # their teardowns, before anything else starts
            else:
                res, total = burst(ctx, [ctx.bwrap_severed] * k)
                lat_bw += [x[1] for x in res]
                wall_bw.append(total)
    recs = json.loads(sh(ctx.cs("runs", "--json", "--limit", str(k * rounds)), env=ctx.env).stdout)
    if any(x["network"] != "filtered" or x["state"] != "exited" or x.get("reason") for x in recs):
        raise BenchError("a concurrent filtered run was not filtered, did not exit 0, or has a "
                         "reason: " + next(x.get("reason") or x["state"] for x in recs
                                           if x["network"] != "filtered" or x["state"] != "exited"
                                           or x.get("reason")))
    sup = [json.load(open(os.path.join(ctx.state, "runs", x["id"], "status.json")))
           .get("supervisor_peak_rss_kb") for x in recs]
    ctx.raw.update({"5_run_latency_s": lat_cs, "5_bwrap_latency_s": lat_bw,
                    "5_run_wall_s": wall_cs, "5_bwrap_wall_s": wall_bw,
                    "5_script_latency_s": lat_sc, "5_script_wall_s": wall_sc})
    row(ctx, "5", f"{k} filtered runs at once: wall", med(wall_cs), f"{k} bwrap severed",
        med(wall_bw), "s", n=rounds)
    if wall_sc:
        row(ctx, "5", f"{k} filtered runs at once: wall", med(wall_cs),
            f"{k} ip+nft+bwrap scripts", med(wall_sc), "s", n=len(wall_sc),
            note=f"scripts' latency p50 {med(lat_sc) * 1e3:.0f} ms, p99 "
                 f"{pct(lat_sc, 99) * 1e3:.0f} ms")
    row(ctx, "5", f"{k} filtered at once: latency p50", med(lat_cs) * 1e3, "bwrap p50",
        med(lat_bw) * 1e3, "ms", n=len(lat_cs), note="spawn → exit of each")
    row(ctx, "5", f"{k} filtered at once: latency p99", pct(lat_cs, 99) * 1e3, "bwrap p99",
        pct(lat_bw, 99) * 1e3, "ms", n=len(lat_cs))
    ctx.mem["5_supervisor_peak_rss_kb_max"] = max(s for s in sup if s is not None)
    ctx.mem["5_supervisor_peak_rss_kb_median"] = med([s for s in sup if s is not None])

    # The same through one worker: 100 submitted at once, until every one is recorded.
    state = os.path.join(ctx.tmp, "state-conc-worker")
    p, _, _ = start_worker(ctx, state)
    cleanup.push("stop the worker (item 5)", lambda: stop_worker(p))
    sub = ctx.cs("submit", "--egress", "allowlist", "--allow", ALLOWED, "--workspace",
                 ctx.ws, "--", "true", state=state, quiet=True)
    t0 = time.perf_counter()
    burst(ctx, [sub] * k)
    while True:
        recs = json.loads(sh(ctx.cs("runs", "--json", "--limit", str(k), state=state),
                             env=ctx.env).stdout)
        if len(recs) == k and all(x["state"] in TERMINAL for x in recs):
            break
        if time.perf_counter() - t0 > 300:
            raise BenchError("concurrent runs via the worker: not all recorded in 300 s")
        if p.poll() is not None:
            raise BenchError(f"the worker exited ({p.returncode}) with runs in flight")
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    bad = [x for x in recs if x["state"] != "exited" or x["network"] != "filtered"]
    if bad:
        raise BenchError(f"{len(bad)} runs via the worker: {bad[0]['state']} {bad[0]['reason']}")
    lat = [(x["ended_ms"] - x["created_ms"]) / 1e3 for x in recs]
    ctx.raw["5_worker_latency_s"], ctx.raw["5_worker_wall_s"] = lat, wall
    row(ctx, "5", f"{k} filtered submitted at once to 1 worker: wall", wall, f"{k} bwrap severed",
        med(wall_bw), "s", n=1, note=f"created → ended p50 {med(lat) * 1e3:.0f} ms, p99 "
        f"{pct(lat, 99) * 1e3:.0f} ms")
    ctx.mem["5_worker_vmhwm_kb"] = vm_hwm_kb(p.pid)
    sup = [json.load(open(os.path.join(state, "runs", x["id"], "status.json")))
           .get("supervisor_peak_rss_kb") for x in recs]
    ctx.mem["5_worker_runs_supervisor_peak_rss_kb_max"] = max(s for s in sup if s is not None)
    stop_worker(p)


def item6_start(ctx):
    n = ctx.args.n
    a, b = alternate(n, lambda: run_timed(ctx, ctx.cs("posture"))[0],
                     lambda: run_timed(ctx, ctx.bwrap_severed)[0])
    ctx.raw["6_posture_s"], ctx.raw["6_bwrap_s"] = a, b
    row(ctx, "6", "`codespace posture` (every probe)", med(a) * 1e3, "bwrap severed `true`",
        med(b) * 1e3, "ms", n=n, note="trial sandbox + namespace + tools + forwarding")
    firsts, readies = [], []
    for k in range(max(3, n // 4)):
        state = os.path.join(ctx.tmp, f"state-start-{k}")
        p, first, ready = start_worker(ctx, state, quiet=False)
        stop_worker(p)
        firsts.append(first)
        readies.append(ready)
    ctx.raw["6_worker_first_line_s"], ctx.raw["6_worker_ready_s"] = firsts, readies
    row(ctx, "6", "`codespace worker` start → posture line", med(firsts) * 1e3,
        "bwrap severed `true`", med(b) * 1e3, "ms", n=len(firsts))
    row(ctx, "6", "`codespace worker` start → ready line", med(readies) * 1e3,
        "bwrap severed `true`", med(b) * 1e3, "ms", n=len(readies),
        note="probes, store opened, sweep; empty store")


def start_socat_bridge(ctx, cleanup, name, broker_port, extra=()):
    """socat TCP-LISTEN → UNIX-CONNECT → socat UNIX-LISTEN → TCP broker; returns the entry port."""
    sock = os.path.join(ctx.tmp, "relay", f"{name}.sock")
    socat = shutil.which("socat")
    procs = [subprocess.Popen([socat, *extra, f"UNIX-LISTEN:{sock},fork,unlink-early",
                               f"TCP:127.0.0.1:{broker_port},nodelay"],
                              stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for _ in range(500):
        if os.path.exists(sock):
            break
        time.sleep(0.01)
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    procs.append(subprocess.Popen([socat, *extra,
                                   f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay",
                                   f"UNIX-CONNECT:{sock}"],
                                  stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in procs:
        cleanup.push(f"stop {name}", lambda p=p: (p.kill(), p.wait()))
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            time.sleep(0.01)
    raise BenchError(f"{name} bridge does not listen")


def item3_relay(ctx, cleanup):
    tool = ctx.args.relay_bench
    if not os.path.exists(tool):
        row(ctx, "3", "relay", None, "socat", None, "", note=f"{tool} not built")
        return
    d = os.path.join(ctx.tmp, "relay")
    os.makedirs(d)
    size, reps, ttfb = ctx.args.relay_bytes, ctx.args.relay_reps, ctx.args.ttfb_reps
    mib = size / (1 << 20)

    # End to end: the client inside a `codespace run --broker` sandbox (severed), through the
    # in-sandbox relay and the supervisor's BrokerBridge, against the same client outside,
    # through socat as it comes (8 KiB buffers) and with the relay's 64 KiB.
    port_file = os.path.join(d, "broker.port")
    broker = subprocess.Popen([tool, "broker", "--port-file", port_file],
                              stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cleanup.push("stop the broker", lambda: (broker.kill(), broker.wait()))
    for _ in range(500):
        if os.path.exists(port_file):
            break
        time.sleep(0.01)
    bport = int(open(port_file).read())
    socat_port = start_socat_bridge(ctx, cleanup, "socat", bport)
    socat64_port = start_socat_bridge(ctx, cleanup, "socat64k", bport, ["-b65536"])
    per = ["--bytes", str(size), "--reps", "1", "--ttfb-reps", str(max(1, ttfb // reps))]
    out = os.path.join(d, "client.out")

    def client(argv):
        run_timed(ctx, argv, out=out)
        return json.load(open(out))

    # The sandbox sees its workspace, not the build tree (a checkout under /tmp, say, is behind
    # the sandbox's own /tmp): the client runs from a copy there, inside and out alike.
    inside = os.path.join(ctx.ws, "relay_bench")
    shutil.copy2(tool, inside)
    cs = ctx.cs("run", "-q", "--egress", "none", "--broker", f"127.0.0.1:{bport}",
                "--workspace", ctx.ws, "--", inside, "client", "--url-env", "CODESPACE_BROKER_URL")
    samples = {"relay": [], "socat": [], "socat64k": []}
    argvs = {"relay": cs + per, "socat": [inside, "client", "--port", str(socat_port)] + per,
             "socat64k": [inside, "client", "--port", str(socat64_port)] + per}
    for name, argv in argvs.items():  # warm-up, and a check that every path works
        client(argv[:-6] + ["--bytes", str(16 << 20), "--reps", "1", "--ttfb-reps", "1"])
    for i in range(reps):
        order = list(argvs) if i % 2 == 0 else list(reversed(argvs))
        for name in order:
            samples[name].append(client(argvs[name]))
    rec = show(ctx, "latest")
    to = rec.get("network_report", {}).get("broker_bytes_to", 0)
    if to < size:
        raise BenchError(f"the brokered run's record counts {to} bytes to the broker, not {size}")
    tp = {k: mib / med([x["throughput_s"][0] for x in v]) for k, v in samples.items()}
    fb = {k: med([y for x in v for y in x["first_byte_us"]]) for k, v in samples.items()}
    ctx.raw["3_e2e"] = samples
    note = "client in a `codespace run --broker` sandbox: TCP → in-sandbox relay → unix → " \
           "supervisor's BrokerBridge → TCP broker"
    row(ctx, "3", f"relay throughput, {mib:.0f} MiB (run --broker)", tp["relay"],
        "socat TCP→UNIX→TCP", tp["socat"], "MiB/s", aim=1.0, higher_is_better=True, n=reps,
        note=note)
    row(ctx, "3", f"relay throughput, {mib:.0f} MiB (run --broker)", tp["relay"], "socat -b65536",
        tp["socat64k"], "MiB/s", higher_is_better=True, n=reps)
    nfb = sum(len(x["first_byte_us"]) for x in samples["relay"])
    row(ctx, "3", "relay time to first byte (run --broker)", fb["relay"] / 1e3,
        "socat TCP→UNIX→TCP", fb["socat"] / 1e3, "ms", aim=1.0, n=nfb,
        note="socket() → connect → 1-byte echo back, a fresh connection each")

    # The engine alone, in one process (no sandbox, no supervisor): isolates the relay code.
    r = subprocess.run([tool, "engine", "--dir", d, "--bytes", str(size), "--reps", str(reps),
                        "--ttfb-reps", str(ttfb), "--socat", shutil.which("socat")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        raise BenchError(f"relay_bench engine: exit {r.returncode}: {r.stderr.strip()}")
    data = json.loads(r.stdout)
    ctx.raw["3_engine"] = data
    tp = {k: mib / med(data[k]["throughput_s"]) for k in ("relay", "socat", "direct")}
    fb = {k: med(data[k]["first_byte_us"]) for k in ("relay", "socat", "direct")}
    row(ctx, "3", f"relay engine alone, {mib:.0f} MiB", tp["relay"], "socat TCP→UNIX→TCP",
        tp["socat"], "MiB/s", higher_is_better=True, n=reps,
        note=f"one process, no sandbox; plain loopback TCP, no relay: {tp['direct']:.0f} MiB/s")
    row(ctx, "3", "relay engine alone, first byte", fb["relay"] / 1e3, "socat TCP→UNIX→TCP",
        fb["socat"] / 1e3, "ms", n=len(data["relay"]["first_byte_us"]),
        note=f"plain loopback TCP: {fb['direct'] / 1e3:.3f} ms")


# ------------------------------------------------------------------------------------------------
# Report.


def machine(args):
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    m = {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
         "load_before": open("/proc/loadavg").read().split()[0],
         "bwrap": sh(["bwrap", "--version"]).stdout.strip(),
         "socat": sh(["socat", "-V"]).stdout.split("\n")[1].strip()}
    if os.path.exists(args.srt):
        m["srt"] = sh([args.srt, "--version"], check=False).stdout.strip()
    return m


def fmt_num(x, unit):
    if x is None:
        return "-"
    if unit == "ms":
        return f"{x:.3f} ms" if x < 1 else f"{x:.1f} ms"
    if unit == "s":
        return f"{x:.2f} s"
    if unit == "MiB/s":
        return f"{x:.0f} MiB/s"
    return f"{x:g} {unit}"


def table(ctx, m, elapsed):
    lines = [f"codespace bench, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}: "
             f"{m['nproc']} cpus ({m['cpu']}), kernel {m['kernel']}, {m['bwrap']}; "
             f"{elapsed:.0f} s; load average {m['load_before']} before, {m['load_after']} after",
             "medians; ratio = codespace / baseline (throughput: higher is better)", ""]
    hdr = ("#", "measure", "codespace", "baseline", "", "ratio", "aim")
    rows = []
    for r in ctx.results:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        aim = "-"
        if r["aim"]:
            aim = r["aim"].replace(">= ", ">=").replace("<= ", "<=") + (
                " ok" if r["met"] else " MISSED")
        rows.append((r["item"], r["what"], fmt_num(r["codespace"], r["unit"]),
                     fmt_num(r["baseline"], r["unit"]), r["baseline_name"], ratio, aim))
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    for x in [hdr] + rows:
        lines.append("  ".join(str(v).ljust(w[i]) if i not in (2, 3, 5) else str(v).rjust(w[i])
                               for i, v in enumerate(x)).rstrip())
    notes = [f"  {r['item']} {r['what']}: {r['note']}" for r in ctx.results if r["note"]]
    if notes:
        lines += ["", "notes:"] + notes
    mem = getattr(ctx, "mem", {})
    if mem:
        lines += ["", "memory (peak RSS, KiB):"]
        lines += [f"  {k}: {v}" for k, v in mem.items()]
    return "\n".join(lines)


def main():
    srt_socks_before = set(glob.glob("/tmp/srt-mux-*.sock"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--relay-bench", default=None)
    ap.add_argument("--srt", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--n", type=int, default=20, help="repetitions of each launch measurement")
    ap.add_argument("--log-bytes", type=int, default=GIB)
    ap.add_argument("--log-reps", type=int, default=5)
    ap.add_argument("--relay-bytes", type=int, default=GIB)
    ap.add_argument("--relay-reps", type=int, default=5)
    ap.add_argument("--ttfb-reps", type=int, default=200)
    ap.add_argument("--concurrent", type=int, default=100)
    ap.add_argument("--concurrent-rounds", type=int, default=3)
    ap.add_argument("--concurrent-scripts", action="store_true",
                    help="item 5 also against as many ip+nft+bwrap scripts at once (heavy)")
    ap.add_argument("--only", default="", help="comma-separated items to run (e.g. 1,3)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    # build-release/bench/ once the top-level CMakeLists.txt has add_subdirectory(bench);
    # build-release/bench-tools/ while `make bench` builds it standalone.
    args.relay_bench = args.relay_bench or next(
        (p for p in (os.path.join(args.build, d, "relay_bench") for d in ("bench", "bench-tools"))
         if os.path.exists(p)), os.path.join(args.build, "bench-tools", "relay_bench"))
    args.srt = args.srt or os.path.join(args.build, "srt", "node_modules", ".bin", "srt")
    args.json = args.json or os.path.join(args.build, "bench.json")
    only = set(filter(None, args.only.split(",")))
    want = (lambda i: not only or i in only)

    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, nftables)")
    for tool in ("bwrap", "ip", "nft", "nsenter", "socat"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} not found")
    if not os.access(os.path.join(args.build, "codespace"), os.X_OK):
        sys.exit(f"bench: no {args.build}/codespace (make bench builds it)")

    # SIGINT too: a shell that starts us in the background leaves it ignored, and then Python
    # would not turn it into KeyboardInterrupt.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    cleanup = Cleanup()
    started = time.time()
    tmp = tempfile.mkdtemp(prefix="csb-bench.", dir="/var/tmp")
    cleanup.push(f"remove {tmp}", lambda: shutil.rmtree(tmp))
    ctx = Ctx(args, tmp)
    ctx.mem = {}
    os.makedirs(ctx.ws)
    os.chdir(ctx.ws)
    cleanup.push("leave the workspace", lambda: os.chdir("/"))
    m = machine(args)
    ok = False
    try:
        build_fake_internet(ctx, cleanup)
        cleanup.push("stop our runs' supervisors, remove their namespaces",
                     lambda: sweep_our_runs(ctx))
        cleanup.push("stop the processes we started", stop_live)
        capture_bwrap_argv(ctx)
        steps = [("1", "severed launch", lambda: (item1_severed(ctx), item1_srt(ctx))),
                 ("2", "filtered launch", lambda: item2_filtered(ctx)),
                 ("6", "worker start", lambda: item6_start(ctx)),
                 ("1", "severed launch via the worker", lambda: item1_worker(ctx, cleanup)),
                 ("4", "log capture", lambda: item4_logs(ctx, cleanup)),
                 ("5", "concurrency", lambda: item5_concurrency(ctx, cleanup)),
                 ("3", "relay", lambda: item3_relay(ctx, cleanup)),
                 ("7", "identity: idmapped workspace", lambda: item7_identity(ctx)),
                 ("8", "CPU limit", lambda: item8_cpu_limit(ctx)),
                 ("9", "syscall filter", lambda: item9_seccomp(ctx))]
        for item, name, fn in steps:
            if want(item):
                log(f"item {item}: {name}")
                t = time.time()
                fn()
                log(f"item {item}: {time.time() - t:.1f} s")
        ok = True
    except KeyboardInterrupt:
        log("interrupted: cleaning up")
    except BenchError as e:
        log(f"failed: {e}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cleanup.run()
        # srt leaves a /tmp/srt-mux-<pid>-0.sock per run: remove the ones this bench made.
        for sock in set(glob.glob("/tmp/srt-mux-*.sock")) - srt_socks_before:
            try:
                os.unlink(sock)
            except OSError:
                pass
    elapsed = time.time() - started
    m["load_after"] = open("/proc/loadavg").read().split()[0]
    text = table(ctx, m, elapsed)
    print(text)
    with open(args.json, "w") as f:
        json.dump({"machine": m, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                   "elapsed_s": elapsed, "complete": ok, "rows": ctx.results, "memory_kb": ctx.mem,
                   "raw": ctx.raw}, f, indent=1)
    log(f"results: {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
