"""Fresh interpreters with forced host devices, and clusters of them on 127.0.0.1.

XLA fixes the number of host devices when JAX starts, so code that needs N (forced host CPU)
devices runs in a fresh interpreter whose environment sets
``XLA_FLAGS=--xla_force_host_platform_device_count=N``. Tests, benchmarks and reproductions all
start such children here: every child has a wall-clock limit and is killed at it; a cluster's
processes are all killed as soon as one of them fails, so nothing outlives its caller.

- ``forced_devices_env(n, extra)``: the environment of a child with n forced host devices;
- ``free_port()``: a free TCP port on a loopback address;
- ``run_python(args, devices=N, ...)``: one child (``["-c", code]`` or ``["-m", module, ...]``) ->
  :class:`Finished` (exit code, output, result, time, peak RSS);
- ``run_cluster(args, n, ...)``: a jax.distributed cluster of n children -> [Finished];
- ``start_cluster`` / ``wait_processes``: the same in two steps (to watch processes that fail).

A child reports one JSON value by printing it behind :data:`RESULT_MARK` (``emit(obj)``; code run
with ``-c`` gets ``emit`` from :data:`PRELUDE`); the parent reads the last such line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PRELUDE",
    "RESULT_MARK",
    "Finished",
    "emit",
    "forced_devices_env",
    "free_port",
    "parse_result",
    "run_cluster",
    "run_python",
    "start_cluster",
    "wait_processes",
]

#: The line prefix behind which a child prints its JSON result.
RESULT_MARK = "@@RESULT@@"

#: Source that defines ``emit(obj)`` in code run with ``python -c`` (numpy arrays become lists).
PRELUDE = f"""
import json as _json

def emit(obj):
    def conv(o):
        if isinstance(o, dict):
            return {{k: conv(v) for k, v in o.items()}}
        if isinstance(o, (list, tuple)):
            return [conv(v) for v in o]
        if hasattr(o, "tolist"):
            return o.tolist()
        return o
    print({RESULT_MARK!r} + _json.dumps(conv(obj)), flush=True)
"""


def emit(obj) -> None:
    """Print ``obj`` (JSON-serialisable) as this child's result line."""
    print(RESULT_MARK + json.dumps(obj), flush=True)


def parse_result(out: str):
    """The value of the last result line in ``out``, or None when there is none."""
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    return None


def forced_devices_env(n_devices: int, extra: dict | None = None, *, path: str | os.PathLike | None = None) -> dict:
    """The environment of a child process that sees ``n_devices`` forced host CPU devices.

    ``XLA_FLAGS`` is read when JAX starts: a running process cannot change its count. Other XLA
    flags are kept; OMP_NUM_THREADS=1 and HF_HUB_OFFLINE=1 unless set.

    Args:
        n_devices: forced host devices of the child (>= 1).
        extra: variables applied last (they win).
        path: a folder put first on PYTHONPATH (a checkout the child imports from).

    Returns:
        A new environment dict; ``os.environ`` is left alone.
    """
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={int(n_devices)}"])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    if path is not None:
        env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now (the OS picks it; another process may take it later)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Finished:
    """How one child ended.

    Attributes:
        returncode: the exit status (negative: killed by that signal); None never appears.
        output: stdout and stderr together, in order.
        result: the value of its last result line (:func:`emit`), or None.
        wall_s: seconds from start to exit.
        peak_rss_mb: the child's peak resident memory in MiB (0 where the OS does not say).
        timed_out: whether it was killed at the time limit.
    """

    returncode: int
    output: str
    result: object
    wall_s: float
    peak_rss_mb: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        """Exit status 0 and not killed."""
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the output."""
        return "\n".join(self.output.strip().splitlines()[-lines:])


def _pin(cores: Sequence[int] | None) -> Callable | None:
    """preexec_fn: pin the child (and every thread it starts) to ``cores`` before it execs."""
    if cores is None:
        return None
    chosen = set(cores)
    return lambda: os.sched_setaffinity(0, chosen)


def _child_env(devices: int | None, env: dict | None, path) -> dict:
    if devices is None:
        return dict(os.environ, **(env or {}))
    return forced_devices_env(devices, env, path=path)


def _code_args(args: Sequence[str]) -> list[str]:
    """``["-c", code]`` gets :data:`PRELUDE` in front of its code; other arguments pass as they are."""
    args = list(args)
    if len(args) >= 2 and args[0] == "-c":
        args[1] = PRELUDE + args[1]
    return args


def run_python(
    args: Sequence[str],
    *,
    devices: int | None = None,
    env: dict | None = None,
    cwd: str | os.PathLike | None = None,
    cores: Sequence[int] | None = None,
    timeout: float = 600,
    log: str | os.PathLike | None = None,
) -> Finished:
    """Run ``python ARGS`` in a fresh interpreter and wait for it, at most ``timeout`` seconds.

    Args:
        args: interpreter arguments, e.g. ``["-c", code]`` (``emit`` predefined) or
            ``["-m", "puaudit_jax.cli", "audit", ...]``.
        devices: forced host devices of the child (None: the environment as it is).
        env: variables added to the child's environment.
        cwd: the child's working folder (also put first on PYTHONPATH when ``devices`` is given).
        cores: CPU cores the child is pinned to (None: no pinning).
        timeout: wall-clock limit in seconds; the child is killed there.
        log: file that keeps the child's output (default: a temporary file, removed).

    Returns:
        :class:`Finished`; a failure is reported there, never raised.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(log) if log is not None else Path(tmp) / "output.log"
        t0 = time.monotonic()
        with open(path, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, *_code_args(args)],
                cwd=cwd,
                env=_child_env(devices, env, cwd),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_pin(cores),
            )
            status, rss, timed_out = _wait_one(proc, t0 + timeout)
        text = path.read_text(errors="replace")
    code = os.waitstatus_to_exitcode(status) if status is not None else proc.returncode
    return Finished(code, text, parse_result(text), time.monotonic() - t0, rss, timed_out)


def _wait_one(proc: subprocess.Popen, deadline: float) -> tuple:
    """Wait for ``proc`` until ``deadline`` (monotonic s), killing it there.

    Returns (wait status, peak RSS in MiB, timed out). The child is always reaped, also when the caller
    is interrupted.
    """
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return status, usage.ru_maxrss / 1024, False
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return None, 0.0, True
            time.sleep(0.05)
    finally:
        if proc.returncode is None and proc.poll() is None:
            proc.kill()
            proc.wait()


def start_cluster(
    args: Sequence[str],
    n_processes: int,
    devices_per_process: int,
    log_dir: str | os.PathLike,
    *,
    env: dict | None = None,
    cwd: str | os.PathLike | None = None,
    cores_of: Callable[[int], Sequence[int] | None] | None = None,
) -> list[subprocess.Popen]:
    """Start ``n_processes`` interpreters that form a jax.distributed cluster on 127.0.0.1.

    Each gets PUAUDIT_COORDINATOR / PUAUDIT_NUM_PROCESSES / PUAUDIT_PROCESS_ID in its environment
    (:func:`puaudit_runtime.cluster.initialize_cluster` reads them); its output goes to
    ``log_dir/process-<i>.log`` (a file, so a chatty process never blocks on a full pipe).

    Args:
        args: interpreter arguments of every process (as :func:`run_python`).
        n_processes: processes in the cluster.
        devices_per_process: forced host devices of each process.
        log_dir: folder of the output files (created).
        env: variables added to every process's environment.
        cwd: working folder of every process (also put first on PYTHONPATH).
        cores_of: rank -> the cores that process is pinned to (None: no pinning).

    Returns:
        The started processes, rank order. When one fails to start, those already started are killed.
    """
    port = free_port()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(n_processes):
            extra = dict(
                env or {},
                PUAUDIT_COORDINATOR=f"127.0.0.1:{port}",
                PUAUDIT_NUM_PROCESSES=str(n_processes),
                PUAUDIT_PROCESS_ID=str(rank),
            )
            with open(log_dir / f"process-{rank}.log", "w") as log:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, *_code_args(args)],
                        env=forced_devices_env(devices_per_process, extra, path=cwd),
                        cwd=cwd,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_pin(cores_of(rank) if cores_of else None),
                    )
                )
    except BaseException:
        _kill(procs)  # the ranks already started would wait for the missing one
        raise
    return procs


def _kill(procs: Sequence[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_processes(procs: Sequence[subprocess.Popen], timeout: float, *, kill_on_failure: bool = True) -> tuple:
    """Wait until every process has exited, or one failed (``kill_on_failure``), or the timeout.

    Whatever still runs then is killed (also on KeyboardInterrupt), so nothing outlives the caller.

    Args:
        procs: the processes (e.g. :func:`start_cluster`'s).
        timeout: the longest wait, in seconds.
        kill_on_failure: whether a nonzero exit of one process stops the wait (and kills the others).

    Returns:
        (why it stopped early, or None; each process's exit time in s from now, None if killed).
    """
    t0 = time.monotonic()
    ended: list[float | None] = [None] * len(procs)
    why = None
    try:
        while why is None and any(e is None for e in ended):
            for i, p in enumerate(procs):
                if ended[i] is None and p.poll() is not None:
                    ended[i] = time.monotonic() - t0
                    if p.returncode != 0 and kill_on_failure:
                        why = f"process {i} exited with {p.returncode}"
            if time.monotonic() - t0 > timeout:
                why = f"timeout after {timeout:.0f} s"
            time.sleep(0.05)
    finally:
        _kill(procs)
    return why, ended


def run_cluster(
    args: Sequence[str],
    n_processes: int,
    devices_per_process: int,
    *,
    timeout: float = 300,
    env: dict | None = None,
    cwd: str | os.PathLike | None = None,
    cores_of: Callable[[int], Sequence[int] | None] | None = None,
    log_dir: str | os.PathLike | None = None,
) -> tuple[str | None, list[Finished]]:
    """Run a cluster (:func:`start_cluster`) to its end and collect each process's output.

    All processes are killed when one fails or at the timeout, so the call ends in bounded time.

    Args:
        args: interpreter arguments of every process (as :func:`run_python`).
        n_processes: processes in the cluster.
        devices_per_process: forced host devices of each process.
        timeout: the longest run, in seconds.
        env: variables added to every process's environment.
        cwd: working folder of every process (also put first on PYTHONPATH).
        cores_of: rank -> the cores that process is pinned to (None: no pinning).
        log_dir: folder of the output files ``process-<i>.log`` (None: a temporary one, removed).

    Returns:
        (why the cluster failed, or None; one :class:`Finished` per process, rank order).
    """
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(log_dir or tmp)
        t0 = time.monotonic()
        procs = start_cluster(args, n_processes, devices_per_process, logs, env=env, cwd=cwd, cores_of=cores_of)
        why, ended = wait_processes(procs, timeout)
        if why is None:
            bad = [i for i, p in enumerate(procs) if p.returncode != 0]
            why = f"process {bad[0]} exited with {procs[bad[0]].returncode}" if bad else None
        outs = [(logs / f"process-{i}.log").read_text(errors="replace") for i in range(n_processes)]
    timed_out = (why or "").startswith("timeout")
    done = [
        Finished(
            p.returncode,
            out,
            parse_result(out),
            time.monotonic() - t0 if t is None else t,
            0.0,
            t is None and timed_out,
        )
        for p, out, t in zip(procs, outs, ended)
    ]
    return why, done
