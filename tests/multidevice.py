"""Test code on forced host devices or on a real multi-process cluster, through puaudit_runtime.launch.

XLA fixes the number of host devices when JAX starts, so multi-device code runs in a fresh
interpreter (:func:`puaudit_runtime.launch.run_python`); the rest of the suite keeps its single
device. Every child has a wall-clock limit; a cluster's processes are all killed as soon as one of
them fails, so nothing outlives the test. These wrappers turn a failure into an AssertionError that
shows the child's output.

    run_devices(code, n_devices, timeout=...) -> the JSON object the code emitted last
    run_cluster(code, n_processes, devices_per_process, timeout=...) -> one JSON object per process
    start_cluster / wait_cluster   the same in two steps (to watch processes that fail)

The code reads its inputs from files the test writes (``tmp_path``) and reports one JSON value with
``emit(obj)`` (predefined; numpy arrays become lists).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from puaudit_runtime import launch

ROOT = Path(__file__).resolve().parents[1]


def run_devices(code: str, n_devices: int, *, timeout: float = 300, env: dict | None = None):
    """Run ``code`` in a fresh interpreter with ``n_devices`` forced host devices; its result."""
    done = launch.run_python(["-c", textwrap.dedent(code)], devices=n_devices, env=env, cwd=ROOT, timeout=timeout)
    what = f"subprocess with {n_devices} devices"
    if not done.ok:
        why = f"timeout after {timeout} s" if done.timed_out else f"rc {done.returncode}"
        raise AssertionError(f"{what} failed ({why}):\n{done.output[-4000:]}")
    if done.result is None:
        raise AssertionError(f"{what} printed no result:\n{done.output[-4000:]}")
    return done.result


def start_cluster(code: str, n_processes: int, devices_per_process: int, log_dir: Path, *, env: dict | None = None):
    """Start ``n_processes`` interpreters running ``code`` as a jax.distributed cluster on 127.0.0.1."""
    args = ["-c", textwrap.dedent(code)]
    return launch.start_cluster(args, n_processes, devices_per_process, log_dir, env=env, cwd=ROOT)


def wait_cluster(procs, timeout: float, *, kill_on_failure: bool = True) -> tuple:
    """(why it stopped early or None, exit times): :func:`puaudit_runtime.launch.wait_processes`."""
    return launch.wait_processes(procs, timeout, kill_on_failure=kill_on_failure)


def run_cluster(
    code: str,
    n_processes: int,
    devices_per_process: int,
    *,
    timeout: float = 300,
    env: dict | None = None,
    log_dir: Path | None = None,
) -> list:
    """Run a cluster to its end and return each process's result (AssertionError with every output
    when one fails or the timeout passes)."""
    args = ["-c", textwrap.dedent(code)]
    why, done = launch.run_cluster(
        args, n_processes, devices_per_process, timeout=timeout, env=env, cwd=ROOT, log_dir=log_dir
    )
    if why is None and any(d.result is None for d in done):
        why = "a process printed no result"
    if why:
        text = "\n".join(f"--- process {i} ---\n{d.output[-3000:]}" for i, d in enumerate(done))
        raise AssertionError(f"cluster of {n_processes} failed: {why}\n{text}")
    return [d.result for d in done]
