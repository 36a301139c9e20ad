"""End to end: one large audit from precomputed embeddings on 1, 2 and 8 devices, same items.csv.

A cone-model comparison set (``puaudit_jax.audit.synthetic``, PUAudit §4.1) at d = 384 (MiniLM's
width) is written as the comparison file + ``.npz`` that ``puaudit audit --embeddings`` reads;
then ``puaudit audit --scorer pot`` runs once per device count, each in its own process with
that many forced host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=D``) and
``--devices D``: the partial-OT solves (scoring and the calibrated rule's cross-fitting) are split
over the devices. The items.csv files are compared (every discrete column identical, scores to
float32 rounding), and the wall time, the process's peak RSS and XLA's per-device buffer
assignment for the largest solve are reported side by side.

    python -m experiments.benchmarks.audit_scale                         # 100,000 items, D = 1, 2, 8
    python -m experiments.benchmarks.audit_scale --n-unlabelled 8000 --devices 1,2    # a quick look

Forced host devices share the machine's cores: on a 2-core CPU, D = 8 cannot be faster than
D = 2. The point of this run is that the answer does not change with D; the speed-up of real
devices is measured by ``experiments.benchmarks.scale``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import ROOT
from puaudit_runtime.files import atomic_path, write_json
from puaudit_runtime.launch import run_python

DISCRETE = ("id", "question_type", "group", "judge", "human", "status", "reason", "role", "adjusted", "flipped")
SCORES = ("score_raw", "score", "p_wrong", "p_wrong_lo", "p_wrong_hi")


def make_data(out: Path, n_labelled: int, n_unlabelled: int, d: int, seed: int) -> tuple[Path, Path]:
    """The comparison table (parquet) and its embeddings (.npz), written once."""
    from puaudit_jax.audit.embed import save_embeddings
    from puaudit_jax.audit.synthetic import cone_comparisons

    table_path, emb_path = out / "cone.parquet", out / "cone.npz"
    stamp = out / "data.json"
    spec = dict(n_labelled=n_labelled, n_unlabelled=n_unlabelled, d=d, seed=seed, neg_range=[0.2, 0.6])
    if stamp.exists() and json.loads(stamp.read_text()) == spec and table_path.exists() and emb_path.exists():
        return table_path, emb_path
    data = cone_comparisons(n_labelled, n_unlabelled, d=d, neg_range=(0.2, 0.6), seed=seed)
    with atomic_path(table_path) as tmp:
        data.table.to_parquet(tmp)
    save_embeddings(data.embeddings, emb_path)
    write_json(spec, stamp)
    return table_path, emb_path


def run_audit(table: Path, emb: Path, devices: int, out: Path, rule: str, dtype: str, timeout: int) -> dict:
    """`puaudit audit` in a fresh process with ``devices`` forced host devices; wall time and peak RSS."""
    cmd = [
        "-m",
        "puaudit_jax.cli",
        "audit",
        str(table),
        "--embeddings",
        str(emb),
        "--scorer",
        "pot",
        "--rule",
        rule,
        "--solver-dtype",
        dtype,
        "--out",
        str(out),
        "--no-figures",
        "--quiet",
    ]
    if devices > 1:
        cmd += ["--devices", str(devices)]
    log_path = out.parent / f"{out.name}.log"
    done = run_python(cmd, devices=devices, cwd=ROOT, timeout=timeout, log=log_path)
    if done.timed_out:
        raise SystemExit(f"audit on {devices} devices ran past {timeout} s; see {log_path}")
    if done.returncode != 0:
        raise SystemExit(f"audit on {devices} devices failed; see {log_path}:\n{done.output[-3000:]}")
    report = json.loads((out / "report.json").read_text())
    crossfit = report.get("crossfit") or {}
    return dict(
        devices=devices,
        out=str(out),
        wall_s=done.wall_s,
        peak_rss_mb=done.peak_rss_mb,
        report_timings=report["timings_s"],
        two_sided="two-sided" in crossfit.get("features", []),
        decision=_decision(report),
        groups=[
            dict(n_U=g["n_U"], n_reference=g["n_reference"], iterations=g["solver"]["iterations"])
            for g in report["groups"]
            if g.get("solver")
        ],
        n_flipped=int(report["counts"].get("flipped", sum(g.get("n_flipped", 0) for g in report["groups"]))),
    )


def _decision(report: dict) -> dict | None:
    """The calibrated rule's decision summary (None for score rules)."""
    d = report.get("decision") or {}
    keys = ("abstained", "n_flipped", "crossfit_gain", "crossfit_gain_lower_bound", "expected_gain")
    return {k: d[k] for k in keys if k in d} or None


def compare(reference: Path, other: Path) -> dict:
    """items.csv of ``other`` against ``reference``: discrete columns equal, max |difference| of scores."""
    a, b = (pd.read_csv(p, keep_default_na=False, low_memory=False) for p in (reference, other))
    if len(a) != len(b) or list(a.columns) != list(b.columns):
        return dict(same_rows=False)
    out = dict(same_rows=True, rows=len(a))
    for col in DISCRETE:
        if col in a:
            out[f"{col}_equal"] = bool((a[col].astype(str) == b[col].astype(str)).all())
    out["flips_differ"] = int((a["flipped"].astype(str) != b["flipped"].astype(str)).sum())
    for col in SCORES:
        if col in a:
            x = pd.to_numeric(a[col], errors="coerce").to_numpy()
            y = pd.to_numeric(b[col], errors="coerce").to_numpy()
            both = ~np.isnan(x) & ~np.isnan(y)
            out[f"{col}_max_abs_diff"] = float(np.max(np.abs(x[both] - y[both]), initial=0.0))
            out[f"{col}_nan_equal"] = bool((np.isnan(x) == np.isnan(y)).all())
    out["identical_file"] = reference.read_bytes() == other.read_bytes()
    return out


def solver_memory(n: int, k: int, d: int, devices: int, dtype: str) -> dict:
    """Per-device XLA buffer assignment of the (n, k) dense solve on ``devices`` forced devices."""
    code = (
        f"from puaudit_runtime.mesh import make_mesh\nfrom puaudit_jax.ot import PartialSinkhorn, sharded\n"
        f"mesh = make_mesh({devices}, axis_names=('u',))\n"
        f"emit(sharded.memory_per_device(PartialSinkhorn(), sharded.Layout.of(mesh), {n}, {k}, {d}, dtype={dtype!r}))"
    )
    done = run_python(["-c", code], devices=devices, cwd=ROOT, timeout=600)
    if not done.ok or done.result is None:
        raise SystemExit(done.output[-3000:])
    return done.result


def recompare(path: Path) -> int:
    """Refresh ``items_vs_reference`` and ``decision`` of every run in ``path`` from its folder."""
    res = json.loads(path.read_text())
    ref = Path(res["runs"][0]["out"]) / "items.csv"
    for r in res["runs"]:
        r["items_vs_reference"] = compare(ref, Path(r["out"]) / "items.csv")
        r["decision"] = _decision(json.loads((Path(r["out"]) / "report.json").read_text()))
        print(r["devices"], r["items_vs_reference"]["flips_differ"], r["decision"])
    write_json(res, path)
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-labelled", type=int, default=2000)
    p.add_argument("--n-unlabelled", type=int, default=98_000)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--devices", default="1,2,8", help="comma list of device counts; the first is the reference")
    p.add_argument("--rule", default="two-sided", help="the audit's rule (default: the CLI's default)")
    p.add_argument(
        "--solver-dtype",
        default="float64",
        choices=["float32", "float64"],
        help="float64 (default): the solves do not depend on the order of additions across devices; "
        "float32: Sinkhorn stops a few iterations apart, see the README",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=3600, help="seconds per audit")
    p.add_argument("--out", default="results/scale_audit")
    p.add_argument(
        "--recompare",
        action="store_true",
        help="recompute the comparisons and decisions of an earlier run's results file from its "
        "output folders (times and memory kept as measured)",
    )
    args = p.parse_args(argv)
    if args.recompare:
        return recompare(Path(args.out) / f"results-{args.rule}-{args.solver_dtype}.json")
    counts = [int(v) for v in args.devices.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table, emb = make_data(out, args.n_labelled, args.n_unlabelled, args.d, args.seed)
    runs = []
    for D in counts:
        print(f"audit on {D} device(s) ...", flush=True)
        runs.append(
            run_audit(
                table,
                emb,
                D,
                out / f"{args.rule}-{args.solver_dtype}-devices-{D}",
                args.rule,
                args.solver_dtype,
                args.timeout,
            )
        )
    ref = Path(runs[0]["out"]) / "items.csv"
    largest = max(runs[0]["groups"], key=lambda g: g["n_reference"] * g["n_U"])
    # the two-sided cross-fitting problems score both orientations of the pool: twice the columns
    shape = (largest["n_reference"], (2 if runs[0]["two_sided"] else 1) * largest["n_U"])
    for r in runs:
        r["items_vs_reference"] = compare(ref, Path(r["out"]) / "items.csv")
        r["solver_memory_per_device"] = solver_memory(*shape, args.d, r["devices"], args.solver_dtype)
    n = args.n_labelled + args.n_unlabelled
    print(
        f"\n{n} items (cone model, d = {args.d}), rule {args.rule}, {args.solver_dtype} solves; largest solve "
        f"{shape[0]} x {shape[1]}; "
        f"{os.cpu_count()} CPU cores"
    )
    print(
        f"{'D':>3} {'wall s':>8} {'vs D=1':>7} {'peak RSS MB':>12} {'solver MB/device':>17} {'vs D=1':>7} "
        f"{'flips':>6} {'discrete equal':>15} {'max |d score|':>14}"
    )
    base = runs[0]
    for r in runs:
        c = r["items_vs_reference"]
        equal = all(v for k, v in c.items() if k.endswith("_equal") or k == "same_rows")
        mem = r["solver_memory_per_device"]["peak"] / 2**20
        print(
            f"{r['devices']:>3} {r['wall_s']:>8.1f} {base['wall_s'] / r['wall_s']:>7.2f} {r['peak_rss_mb']:>12.0f} "
            f"{mem:>17.1f} {base['solver_memory_per_device']['peak'] / 2**20 / mem:>7.2f} {r['n_flipped']:>6} "
            f"{str(equal):>15} {c.get('score_max_abs_diff', float('nan')):>14.2e}"
        )
    name = f"results-{args.rule}-{args.solver_dtype}.json"
    write_json(dict(settings=vars(args), items=n, largest_solve=shape, runs=runs), out / name)
    print(f"wrote {out}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
