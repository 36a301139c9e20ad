"""A pytest plugin that says where each test's time goes (loaded by ``experiments.benchmarks.test_suite``).

For every test and phase (setup, call, teardown) it records, in the process that runs the test (an
xdist worker or the main one), ``seconds`` (the phase's wall time) and:

- ``compile``: seconds of JAX compilation (lowering + XLA backend compile, from ``jax.monitoring``);
- ``children``: seconds spent waiting for child interpreters (``puaudit_runtime.launch``: forced-device
  subprocesses and clusters; ``subprocess.run``; ``Popen.wait`` / ``communicate``: the CLI tests);
- ``sleep``: seconds in ``time.sleep`` outside those waits;
- ``failed``: 1 where a phase failed.

Lines of JSON go to ``$PUAUDIT_SUITE_METER/<pid>.jsonl``, one per test; fixture setups that take
over 0.5 s are recorded too (``fixture`` lines), which is where models and data are loaded.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

_STATE = {"test": None, "phase": None, "in_child": 0}
_COUNTS: dict = {}
_COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")


def _add(kind: str, seconds: float) -> None:
    if _STATE["test"] is not None:
        _COUNTS.setdefault(_STATE["test"], Counter())[f"{kind}_{_STATE['phase']}"] += seconds


def _waiting(fn):
    """``fn`` with its wall time counted as time in children (outermost call only)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if _STATE["in_child"]:
            return fn(*args, **kwargs)
        _STATE["in_child"] += 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _STATE["in_child"] -= 1
            _add("children", time.perf_counter() - t0)

    return wrapped


def _sleep(fn):
    @functools.wraps(fn)
    def wrapped(seconds):
        if not _STATE["in_child"]:
            _add("sleep", seconds)
        return fn(seconds)

    return wrapped


def _out() -> Path:
    folder = Path(os.environ["PUAUDIT_SUITE_METER"])
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{os.getpid()}.jsonl"


def _write(record: dict) -> None:
    with open(_out(), "a") as handle:
        handle.write(json.dumps(record) + "\n")


def pytest_configure(config):
    if not os.environ.get("PUAUDIT_SUITE_METER"):
        return
    import jax  # after the test conftest set JAX's environment

    from puaudit_runtime import launch

    jax.monitoring.register_event_duration_secs_listener(
        lambda event, secs, **kw: _add("compile", secs) if event in _COMPILE_EVENTS else None
    )
    for name in ("run_python", "run_cluster", "wait_processes"):
        setattr(launch, name, _waiting(getattr(launch, name)))
    subprocess.run = _waiting(subprocess.run)
    subprocess.Popen.wait = _waiting(subprocess.Popen.wait)
    subprocess.Popen.communicate = _waiting(subprocess.Popen.communicate)
    time.sleep = _sleep(time.sleep)


def _phase(name):
    @pytest.hookimpl(hookwrapper=True)
    def hook(item):
        _STATE["test"], _STATE["phase"] = item.nodeid, name
        t0 = time.perf_counter()
        yield
        _add("seconds", time.perf_counter() - t0)
        _STATE["phase"] = None

    return hook


pytest_runtest_setup = _phase("setup")
pytest_runtest_call = _phase("call")
pytest_runtest_teardown = _phase("teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    t0 = time.perf_counter()
    yield
    seconds = time.perf_counter() - t0
    if os.environ.get("PUAUDIT_SUITE_METER") and seconds > 0.5:
        _write({"fixture": fixturedef.argname, "scope": fixturedef.scope, "seconds": seconds})


def pytest_runtest_logreport(report):
    if report.failed:
        _COUNTS.setdefault(report.nodeid, Counter())["failed"] = 1


def pytest_runtest_logfinish(nodeid, location):
    if os.environ.get("PUAUDIT_SUITE_METER") and nodeid in _COUNTS:  # xdist's controller ran no phase: no line
        _write({"test": nodeid, **_COUNTS.pop(nodeid)})
