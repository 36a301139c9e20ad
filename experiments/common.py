"""What several experiments share: where results go, the benchmarks' worker processes, timing,
table cells, the machine they ran on.

    ROOT, RESULTS, LOCAL_JUDGE_CSV      the repository, its results/ folder, the local judge's
                                        MT-Bench verdicts (input of three reproductions)
    worker_args(module, spec)           ``-m module --worker SPEC``: a benchmark re-run in a fresh
                                        interpreter for one configuration (it ``emit``s its result)
    run_worker(module, spec, ...)       that child through ``puaudit_runtime.launch.run_python``:
                                        its result, or ``dict(spec, <key>=why it failed)``
    serve_worker(args, worker)          the child's side: run ``worker`` on ``--worker SPEC`` and emit it
    timed(fn, ...) / best_seconds(fn, n) / median_seconds(fn, n)    wall-clock timing
    fmt(v, spec)                        a number as a table cell ("-" for None, nan, inf)
    dump_json(obj, path, indent)        ``json.dump`` written atomically (NaN stays NaN)
    mesh_from_flags(args, parser)       ``--devices`` / ``--mesh`` of one process -> Mesh or None
    machine() / load_average() / machine_header(info, name)    the CPU, cores, memory and load
    wilson(k, n)                        95 % Wilson interval of a proportion
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from puaudit_runtime.files import atomic_path
from puaudit_runtime.launch import emit, run_python

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
LOCAL_JUDGE_CSV = RESULTS / "local_judge" / "mtbench_local.csv"


# ----------------------------------------------------------------------------- worker processes
def worker_args(module: str, spec: dict) -> list[str]:
    """Interpreter arguments that run ``module``'s ``--worker`` entry on ``spec`` (JSON)."""
    return ["-m", module, "--worker", json.dumps(spec)]


def run_worker(
    module: str,
    spec: dict,
    *,
    key: str = "failed",
    devices: int | None = None,
    cores: Sequence[int] | None = None,
    env: dict | None = None,
    timeout: float = 600,
) -> dict:
    """Run ``python -m module --worker SPEC`` from the repository root in a fresh interpreter.

    Args:
        module: the benchmark's module (``experiments.benchmarks.ot``); its worker prints its
            result with ``puaudit_runtime.launch.emit``.
        spec: the configuration (JSON-serialisable).
        key: the key that says why a run gave no result ("failed" or "skipped").
        devices: forced host devices of the child (None: this process's environment).
        cores: CPU cores the child is pinned to (None: no pinning).
        env: variables added to the child's environment.
        timeout: seconds; the child is killed there.

    Returns:
        The worker's result dict, or ``dict(spec, <key>=...)``: "timeout after T s", or
        "rc N: <last line of its output>" (the output's tail is copied to stderr).
    """
    done = run_python(worker_args(module, spec), devices=devices, env=env, cwd=ROOT, cores=cores, timeout=timeout)
    if done.timed_out:
        return dict(spec, **{key: f"timeout after {timeout:.0f} s"})
    if done.ok and isinstance(done.result, dict):
        return done.result
    tail = done.tail(12)
    sys.stderr.write(tail + "\n")
    return dict(spec, **{key: f"rc {done.returncode}: {tail.splitlines()[-1] if tail else ''}"})


def serve_worker(args, worker: Callable[[dict], dict]) -> bool:
    """In a child started by :func:`run_worker` (``args.worker`` holds its JSON spec): emit ``worker(spec)``.

    Returns:
        Whether this process was such a child (its ``main`` then returns).
    """
    if not args.worker:
        return False
    emit(worker(json.loads(args.worker)))
    return True


# ----------------------------------------------------------------------------- timing
def timed(fn: Callable, *args, **kwargs) -> tuple[object, float]:
    """(``fn(*args, **kwargs)``, its wall-clock seconds)."""
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn()``, in seconds (inf for none)."""
    return min((timed(fn)[1] for _ in range(repeats)), default=math.inf)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The median wall-clock seconds of ``repeats`` calls of ``fn()``."""
    return statistics.median(timed(fn)[1] for _ in range(repeats))


# ----------------------------------------------------------------------------- output
def fmt(v, spec: str = ".3g") -> str:
    """``v`` formatted by ``spec`` for a table cell; "-" for None and non-finite floats."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def dump_json(obj, path: str | Path, *, indent: int = 1, default: Callable | None = None) -> Path:
    """``json.dump(obj)`` into ``path`` atomically, as written: NaN stays NaN (unlike
    ``puaudit_runtime.files.write_json``, which writes null), numpy values need ``default``."""
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        json.dump(obj, fh, indent=indent, default=default)
    return Path(path)


def mesh_from_flags(args, parser):
    """The mesh of ``--devices`` / ``--mesh`` in this process (no cluster), named on stdout;
    None for one device. A bad flag ends the program through ``parser.error``."""
    from puaudit_runtime.flags import mesh_from_args
    from puaudit_runtime.mesh import describe_mesh

    mesh = mesh_from_args(args, join_cluster=False, fail=parser.error)
    if mesh is not None:
        print(f"mesh: {describe_mesh(mesh)}", flush=True)
    return mesh


# ----------------------------------------------------------------------------- the machine
def machine() -> dict:
    """The CPU model, logical and usable cores, memory (bytes) and lscpu's family, model, L3 cache
    and hypervisor (keys ``lscpu <field>``), as far as /proc and lscpu tell."""
    info = dict(cpu="unknown", logical_cpus=os.cpu_count(), usable_cpus=sorted(os.sched_getaffinity(0)))
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, val = line.split(":", 1)
                if key in ("MemTotal", "MemAvailable"):
                    info[key] = int(val.split()[0]) * 1024
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "L3 cache", "CPU family", "Model", "Hypervisor vendor"):
                info["lscpu " + k.strip()] = v.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def load_average() -> tuple:
    """The 1, 5 and 15 minute load averages, rounded to 0.01."""
    return tuple(round(v, 2) for v in os.getloadavg())


def machine_header(info: dict, name: str) -> str:
    """Two comment lines naming the machine of ``info`` (:func:`machine`) and the load now."""
    usable = info["usable_cpus"]
    lines = [
        f"# {name} on {info['cpu']} (family {info.get('lscpu CPU family', '?')} model "
        f"{info.get('lscpu Model', '?')}, L3 {info.get('lscpu L3 cache', '?')}, "
        f"hypervisor {info.get('lscpu Hypervisor vendor', 'none')}): {info['logical_cpus']} logical cores, "
        f"usable {usable}, memory {info.get('MemTotal', 0) / 2**30:.1f} GiB "
        f"({info.get('MemAvailable', 0) / 2**30:.1f} GiB available)",
        f"# load average (1, 5, 15 min) at start: {load_average()}",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- statistics
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion k / n."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (float(c - h), float(c + h))
