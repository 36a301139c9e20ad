"""Benchmark: probes.pls.PLSRegression (JAX) vs scikit-learn's PLSRegression, fit time and predictions.

    OMP_NUM_THREADS=1 taskset -c 1 python -m experiments.bench_pls [--sizes 700x1000,...] [--components 16]

For every (n, d): synthetic low-rank regression data (float64), PLS1 with 16 components.
sklearn: one timed fit. Ours: the first fit (jit compilation included) and the median of the next
`--repeats` fits, in float64 (JAX x64) and float32. Predictions are compared on held-out rows
(max |ours - sklearn|, relative to the std of y). Prints the ratios side by side and writes
results/bench_pls.json (+ .csv) atomically. A script, not a test: no timed assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from probes.pls import PLSRegression

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def make_data(n: int, d: int, seed: int, rank: int = 32):
    """X = Z A + noise (n, d) with `rank` latent factors and per-column offsets/scales; y = Z b + noise."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n + 500, rank))
    X = Z @ rng.normal(size=(rank, d)) + rng.normal(size=(n + 500, d))
    X = X * rng.uniform(0.5, 3, d) + rng.normal(0, 2, d)
    y = Z @ rng.normal(size=rank) + rng.normal(size=n + 500)
    return X[:n], y[:n], X[n:], y[n:]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_case(n: int, d: int, k: int, repeats: int, seed: int) -> dict:
    from sklearn.cross_decomposition import PLSRegression as SkPLS

    X, y, Xt, yt = make_data(n, d, seed)
    sk, t_sk = _timed(lambda: SkPLS(k).fit(X, y))
    ref = sk.predict(Xt)
    row = dict(n=n, d=d, components=k, sklearn_s=t_sk)
    for dtype in ("float64", "float32"):
        with jax.enable_x64(dtype == "float64"):
            ours, t_first = _timed(lambda: PLSRegression(k, dtype=dtype).fit(X, y))
            times = [_timed(lambda: PLSRegression(k, dtype=dtype).fit(X, y))[1] for _ in range(repeats)]
            pred = ours.predict(Xt)
        row[f"jax_{dtype}_first_s"] = t_first
        row[f"jax_{dtype}_s"] = float(np.median(times))
        row[f"speedup_{dtype}"] = t_sk / row[f"jax_{dtype}_s"]
        row[f"max_pred_diff_{dtype}"] = float(np.abs(pred - ref).max() / np.std(yt))
    row["r2_sklearn"] = float(1 - np.mean((ref - yt) ** 2) / np.var(yt))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="700x1000,700x4000,10000x1000,10000x4000,50000x1000,50000x4000")
    ap.add_argument("--components", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "bench_pls.json"))
    args = ap.parse_args(argv)
    rows = []
    for spec in args.sizes.split(","):
        n, d = map(int, spec.lower().split("x"))
        row = run_case(n, d, args.components, args.repeats, args.seed)
        rows.append(row)
        print(f"n={n:>6} d={d:>5}: sklearn {row['sklearn_s']:7.2f}s | jax f64 {row['jax_float64_s']:6.2f}s "
              f"(x{row['speedup_float64']:.1f}, first {row['jax_float64_first_s']:.1f}s, pred diff "
              f"{row['max_pred_diff_float64']:.1e}) | jax f32 {row['jax_float32_s']:6.2f}s "
              f"(x{row['speedup_float32']:.1f}, pred diff {row['max_pred_diff_float32']:.1e})", flush=True)
    table = pd.DataFrame(rows)
    meta = dict(seed=args.seed, components=args.components, repeats=args.repeats, jax=jax.__version__,
                devices=[str(x) for x in jax.devices()], machine=platform.machine(),
                omp_num_threads=os.environ.get("OMP_NUM_THREADS"), cpu_affinity=sorted(os.sched_getaffinity(0)),
                note="pred diff = max |ours - sklearn| / std(y) on 500 held-out rows; *_s = wall seconds per fit "
                     "(median of repeats after the first, compiling, fit)")
    out = Path(args.out)
    _write_atomic(out, json.dumps(dict(meta=meta, rows=rows), indent=2))
    _write_atomic(out.with_suffix(".csv"), table.to_csv(index=False))
    print(table[["n", "d", "sklearn_s", "jax_float64_s", "speedup_float64", "jax_float32_s", "speedup_float32",
                 "max_pred_diff_float64"]].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"wrote {out} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
