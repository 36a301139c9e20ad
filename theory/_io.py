"""Atomic result writing and the common CLI of the theory modules."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from puaudit_runtime.files import atomic_path

DEFAULT_OUT = Path("results/theory")
QUICK_OUT = Path("build/theory")  # a --quick run's check, not a result: outside the tracked results/


def cli(description: str, argv=None) -> argparse.Namespace:
    """``--quick`` (small sweep, < 1 min) and ``--out DIR`` (default results/theory; build/theory with --quick)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sweep (under a minute)")
    parser.add_argument("--out", type=Path, help=f"output directory (default {DEFAULT_OUT}; {QUICK_OUT} with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="master seed")
    args = parser.parse_args(argv)
    return argparse.Namespace(**{**vars(args), "out": args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)})


def run_statement(name: str, description: str, default, quick, run, plot, argv=None):
    """The shared ``main`` of a theory module: parse the CLI, run ``run(cfg)`` (timed) with the
    full or ``--quick`` config and the given seed, write ``<name>[_quick].png`` and ``.json``.

    Returns (args, stem, res) so the module can print its own summary.
    """
    args = cli(description, argv)
    cfg = dataclasses.replace(quick if args.quick else default, seed=args.seed)
    t0 = time.time()
    res = run(cfg)
    res["wall_s"] = time.time() - t0
    res["quick"] = bool(args.quick)
    stem = name + ("_quick" if args.quick else "")
    write_figure(args.out / f"{stem}.png", plot(res))
    write_json(args.out / f"{stem}.json", res)
    return args, stem, res


def _default(o):
    if dataclasses.is_dataclass(o):
        return dataclasses.asdict(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


def _atomic(path: Path, write) -> Path:
    """``write(fh)`` into a binary file that becomes ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            write(fh)
    return Path(path)


def write_json(path: Path, obj) -> Path:
    """JSON (numpy- and dataclass-aware), written to a temp file and renamed into place."""
    text = json.dumps(obj, indent=2, default=_default, allow_nan=True)
    return _atomic(path, lambda fh: fh.write(text.encode()))


def write_figure(path: Path, fig) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    out = _atomic(path, lambda fh: fig.savefig(fh, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return out


def new_figure(nrows: int, ncols: int, size=(4.6, 3.6)):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    return fig, axes
