"""Run test code on forced host devices or on a real multi-process cluster, in subprocesses.

XLA fixes the number of host devices when JAX starts, so multi-device code runs in a fresh
interpreter with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``; the rest of the suite
keeps its single device. Every subprocess has a wall-clock limit and is killed at it; a cluster's
processes are all killed as soon as one of them fails, so nothing outlives the test.

    run_devices(code, n_devices, timeout=...) -> the JSON object the code printed last
    run_cluster(code, n_processes, devices_per_process, timeout=...) -> one JSON object per process
    start_cluster / wait_cluster   the same in two steps (to watch processes that fail)

The code reads its inputs from files the test writes (``tmp_path``) and prints one JSON line
(``emit(obj)`` is predefined; numpy arrays become lists).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from puaudit_runtime.launch import forced_devices_env

ROOT = Path(__file__).resolve().parents[1]

_PRELUDE = """
import json as _json, sys as _sys
import numpy as _np

def emit(obj):
    def conv(o):
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [conv(v) for v in o]
        if hasattr(o, "tolist"):
            return _np.asarray(o).tolist()
        return o
    print("@@RESULT@@" + _json.dumps(conv(obj)), flush=True)
"""


def _env(n_devices: int, extra: dict | None = None) -> dict:
    return forced_devices_env(n_devices, extra, path=ROOT)


def _result(out: str, what: str):
    for line in reversed(out.splitlines()):
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@") :])
    raise AssertionError(f"{what} printed no result:\n{out[-4000:]}")


def run_devices(code: str, n_devices: int, *, timeout: float = 300, env: dict | None = None):
    """Run ``code`` in a fresh interpreter with ``n_devices`` forced host devices."""
    src = _PRELUDE + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", src], env=_env(n_devices, env), cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise AssertionError(f"subprocess with {n_devices} devices failed (rc {proc.returncode}):\n{out[-4000:]}")
    return _result(proc.stdout, f"subprocess with {n_devices} devices")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(
    code: str, n_processes: int, devices_per_process: int, log_dir: Path, *, env: dict | None = None
) -> list[subprocess.Popen]:
    """Start ``n_processes`` interpreters that form a jax.distributed cluster on 127.0.0.1.

    Each gets PUAUDIT_COORDINATOR / PUAUDIT_NUM_PROCESSES / PUAUDIT_PROCESS_ID in its environment
    (``probes.mesh.initialize_cluster()`` reads them); its output goes to ``log_dir/process-<i>.log``
    (a file, so a chatty process never blocks on a full pipe).
    """
    port = free_port()
    src = _PRELUDE + textwrap.dedent(code)
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
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
                        [sys.executable, "-c", src],
                        env=_env(devices_per_process, extra),
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        text=True,
                    )
                )
    except BaseException:
        _kill(procs)  # the ranks already started would wait for the missing one
        raise
    return procs


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_cluster(procs: list[subprocess.Popen], timeout: float, *, kill_on_failure: bool = True) -> tuple:
    """Wait until every process has exited, or one failed (``kill_on_failure``), or the timeout;
    then kill whatever still runs. Returns (why it stopped or None, exit times in s from now)."""
    t0 = time.monotonic()
    ended = [None] * len(procs)
    why = None
    try:
        while why is None and any(e is None for e in ended):
            for i, p in enumerate(procs):
                if ended[i] is None and p.poll() is not None:
                    ended[i] = time.monotonic() - t0
                    if p.returncode != 0 and kill_on_failure:
                        why = f"process {i} exited with {p.returncode}"
            if time.monotonic() - t0 > timeout:
                why = f"timeout after {timeout} s"
            time.sleep(0.05)
    finally:  # also on KeyboardInterrupt or a pytest timeout: nothing outlives the test
        _kill(procs)
    return why, ended


def run_cluster(
    code: str,
    n_processes: int,
    devices_per_process: int,
    *,
    timeout: float = 300,
    env: dict | None = None,
    log_dir: Path | None = None,
) -> list:
    """Run a cluster (``start_cluster``) and return each process's JSON result. All processes are
    killed when one fails or at the timeout, so the test ends by itself in bounded time."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(log_dir or tmp)
        procs = start_cluster(code, n_processes, devices_per_process, logs, env=env)
        failed, _ = wait_cluster(procs, timeout)
        if failed is None:
            bad = [i for i, p in enumerate(procs) if p.returncode != 0]
            failed = f"process {bad[0]} exited with {procs[bad[0]].returncode}" if bad else None
        outs = [(logs / f"process-{i}.log").read_text() for i in range(n_processes)]
    if failed:
        text = "\n".join(f"--- process {i} ---\n{o[-3000:]}" for i, o in enumerate(outs))
        raise AssertionError(f"cluster of {n_processes} failed: {failed}\n{text}")
    return [_result(o, f"process {i}") for i, o in enumerate(outs)]
