"""Benchmark: probes.pls.PLSRegression (JAX) vs scikit-learn's PLSRegression, fit time and predictions.

    OMP_NUM_THREADS=1 taskset -c 1 python -m experiments.benchmarks.pls [--sizes 700x1000,...] [--components 16]
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m experiments.benchmarks.pls --devices 8 [--mesh 2x4]

For every (n, d): synthetic low-rank regression data (float64), PLS1 with 16 components.
sklearn: one timed fit. Ours: the first fit (jit compilation included) and the median of the next
`--repeats` fits, in float64 (JAX x64) and float32. Predictions are compared on held-out rows
(max |ours - sklearn|, relative to the std of y). With `--float32-input`, the float32 fits get X cast
to float32 (then standardised on the device, not on the host in float64), the held-out X too.
Prints the ratios side by side and writes results/bench_pls.json (+ .csv) atomically. A script, not
a test: no timed assertions.

With `--devices` / `--mesh` (puaudit_runtime.mesh.make_mesh) every fit of ours is also run row-sharded on
that mesh (`PLSRegression(mesh=...)`), the single-device and mesh fits timed in turn; the table
adds the mesh times, single / mesh (> 1: the mesh is faster) and max |mesh - single| predictions.
Default output then results/bench_pls_mesh.json (+ .csv).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from experiments.common import RESULTS, mesh_from_flags, timed
from probes.pls import PLSRegression
from puaudit_runtime.files import write_text
from puaudit_runtime.flags import add_device_arguments


def make_data(n: int, d: int, seed: int, rank: int = 32):
    """X = Z A + noise (n, d) with `rank` latent factors and per-column offsets/scales; y = Z b + noise."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n + 500, rank))
    X = Z @ rng.normal(size=(rank, d)) + rng.normal(size=(n + 500, d))
    X = X * rng.uniform(0.5, 3, d) + rng.normal(0, 2, d)
    y = Z @ rng.normal(size=rank) + rng.normal(size=n + 500)
    return X[:n], y[:n], X[n:], y[n:]


def run_case(n: int, d: int, k: int, repeats: int, seed: int, mesh=None, float32_input: bool = False) -> dict:
    """One (n, d): sklearn, ours in float64 and float32 and, with a `mesh`, ours row-sharded on it
    (each repeat times the single-device fit, then the mesh fit); `float32_input`: the float32 fits
    get float32 X."""
    from sklearn.cross_decomposition import PLSRegression as SkPLS

    X, y, Xt, yt = make_data(n, d, seed)
    sk, t_sk = timed(lambda: SkPLS(k).fit(X, y))
    ref = sk.predict(Xt)
    row = dict(n=n, d=d, components=k, sklearn_s=t_sk)
    sides = {"": None} if mesh is None else {"": None, "_mesh": mesh}
    for dtype in ("float64", "float32"):
        cast = float32_input and dtype == "float32"
        Xd, Xtd = (X.astype(np.float32), Xt.astype(np.float32)) if cast else (X, Xt)
        with jax.enable_x64(dtype == "float64"):
            fits = {
                s: (lambda m=m, dt=dtype, Xd=Xd: PLSRegression(k, dtype=dt, mesh=m).fit(Xd, y))
                for s, m in sides.items()
            }
            firsts = {s: timed(fit) for s, fit in fits.items()}
            times = {s: [] for s in sides}
            for _ in range(repeats):
                for s, fit in fits.items():
                    times[s].append(timed(fit)[1])
            preds = {s: model.predict(Xtd).astype(np.float64) for s, (model, _) in firsts.items()}
        for s in sides:
            row[f"jax_{dtype}{s}_first_s"] = firsts[s][1]
            row[f"jax_{dtype}{s}_s"] = float(np.median(times[s]))
        row[f"speedup_{dtype}"] = t_sk / row[f"jax_{dtype}_s"]
        row[f"max_pred_diff_{dtype}"] = float(np.abs(preds[""] - ref).max() / np.std(yt))
        if mesh is not None:
            row[f"mesh_speedup_{dtype}"] = row[f"jax_{dtype}_s"] / row[f"jax_{dtype}_mesh_s"]
            row[f"mesh_pred_diff_{dtype}"] = float(np.abs(preds["_mesh"] - preds[""]).max() / np.std(yt))
    row["r2_sklearn"] = float(1 - np.mean((ref - yt) ** 2) / np.var(yt))
    return row


def _mesh_note(row: dict, dtype: str) -> str:
    if f"jax_{dtype}_mesh_s" not in row:
        return ""
    return (
        f" | mesh {row[f'jax_{dtype}_mesh_s']:6.2f}s (single/mesh x{row[f'mesh_speedup_{dtype}']:.2f}, "
        f"diff {row[f'mesh_pred_diff_{dtype}']:.1e})"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="700x1000,700x4000,10000x1000,10000x4000,50000x1000,50000x4000")
    ap.add_argument("--components", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--float32-input", action="store_true", help="the float32 fits get X cast to float32")
    ap.add_argument("--out", default=None, help="default results/bench_pls.json (bench_pls_mesh.json with a mesh)")
    add_device_arguments(ap, cluster=False, what="a second, row-sharded fit of ours (compared with one device)")
    args = ap.parse_args(argv)
    mesh = mesh_from_flags(args, ap)
    rows = []
    for spec in args.sizes.split(","):
        n, d = map(int, spec.lower().split("x"))
        row = run_case(n, d, args.components, args.repeats, args.seed, mesh, args.float32_input)
        rows.append(row)
        print(
            f"n={n:>6} d={d:>5}: sklearn {row['sklearn_s']:7.2f}s | jax f64 {row['jax_float64_s']:6.2f}s "
            f"(x{row['speedup_float64']:.1f}, first {row['jax_float64_first_s']:.1f}s, pred diff "
            f"{row['max_pred_diff_float64']:.1e}){_mesh_note(row, 'float64')} | jax f32 "
            f"{row['jax_float32_s']:6.2f}s (x{row['speedup_float32']:.1f}, pred diff "
            f"{row['max_pred_diff_float32']:.1e}){_mesh_note(row, 'float32')}",
            flush=True,
        )
    table = pd.DataFrame(rows)
    meta = dict(
        seed=args.seed,
        float32_input=args.float32_input,
        components=args.components,
        repeats=args.repeats,
        jax=jax.__version__,
        devices=[str(x) for x in jax.devices()],
        machine=platform.machine(),
        mesh=None if mesh is None else dict(mesh.shape),
        xla_flags=os.environ.get("XLA_FLAGS"),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        cpu_affinity=sorted(os.sched_getaffinity(0)),
        note="pred diff = max |ours - sklearn| / std(y) on 500 held-out rows; *_s = wall seconds per fit "
        "(median of repeats after the first, compiling, fit); *_mesh_s the same row-sharded on "
        "the mesh, mesh_speedup = single-device / mesh time, mesh_pred_diff = max |mesh - single| "
        "/ std(y)",
    )
    out = Path(args.out or RESULTS / ("bench_pls.json" if mesh is None else "bench_pls_mesh.json"))
    write_text(json.dumps(dict(meta=meta, rows=rows), indent=2), out)
    write_text(table.to_csv(index=False), out.with_suffix(".csv"))
    cols = [
        "n",
        "d",
        "sklearn_s",
        "jax_float64_s",
        "speedup_float64",
        "jax_float32_s",
        "speedup_float32",
        "max_pred_diff_float64",
    ]
    if mesh is not None:
        cols = [
            "n",
            "d",
            "jax_float64_s",
            "jax_float64_mesh_s",
            "mesh_speedup_float64",
            "jax_float32_s",
            "jax_float32_mesh_s",
            "mesh_speedup_float32",
            "mesh_pred_diff_float64",
            "mesh_pred_diff_float32",
        ]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"wrote {out} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
