"""``puaudit monitor``'s guarantees measured: false alarms on drift-free streams, detection delay, coverage.

1. Type-I error under optional stopping: ``--streams`` Bernoulli streams of ``--length`` labels whose
   agreement is exactly at the threshold A = 0.8 and above it; the share that ever alarms, for the
   e-process designs (mixture over start times and single, discounted bets; single with full-history
   bets) and, for contrast, a fixed-n one-sided z-test peeked at after every batch of 20 labels (on all
   labels so far, and on a rolling window of the last 100).
2. Detection: agreement falls from 90 % to 60 % after 200 or 1,000 good labels (and from 85 % after
   1,000, from 81 %, just above A, after 2,000, where a single process could have spent its wealth);
   alarms before the change, the share caught, and the delay (labels after the change) distribution.
3. Coverage of the confidence sequence (the true mean inside the band at every n at once).
4. The bundled sets replayed in random orders with a judge swap: MT-Bench's GPT-4 verdicts replaced
   by random ones half of the time after row 600; LLMFAO's GPT-4 judge replaced by GPT-3.5 after
   row 1,000 (the same pairs); alarms before the swap and the delay after it.

    OMP_NUM_THREADS=1 python -m experiments.reproductions.monitor                  # ~5 min on 2 cores
    OMP_NUM_THREADS=1 python -m experiments.reproductions.monitor --streams 200   # a quick look

Writes results/monitor.{md,csv,json} and results/monitor_mtbench_swap.png.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy.stats import norm

from experiments.common import RESULTS, wilson
from puaudit_jax.datasets.bundled import load_bundled
from puaudit_jax.quantify import MonitorConfig, monitor
from puaudit_jax.quantify.betting import drop_bets, e_process, hedged_cs
from puaudit_jax.quantify.monitoring import values_of
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

A, ALPHA, BATCH, WINDOW = 0.8, 0.05, 20, 100
FULL = 10**9  # a memory this long: the bets use every earlier label (plain aGRAPA)
DESIGNS = {"e-process: mixture, memory 50": ("mixture", 50), "e-process: single, memory 50": ("single", 50),
           "e-process: mixture, memory 200": ("mixture", 200),
           "e-process: single, full history": ("single", FULL)}  # fmt: skip


def first_alarms(x: np.ndarray, threshold: float, design: str, memory: int) -> np.ndarray:
    """(S,) index of each stream's first alarm (e-value >= 1/alpha), -1 where none."""
    rang = e_process(x, threshold, drop_bets(x, threshold, memory), design) >= np.log(1 / ALPHA)
    return np.where(rang.any(axis=1), rang.argmax(axis=1), -1)


def z_alarms(x: np.ndarray, threshold: float, window: int | None) -> np.ndarray:
    """(S,) first alarm of a one-sided fixed-n z-test (mean < A) peeked at after every batch, -1 where none."""
    s = np.cumsum(x, axis=1)
    ends = np.arange(BATCH, x.shape[1] + 1, BATCH) - 1
    n = ends + 1 if window is None else np.minimum(ends + 1, window)
    sums = s[:, ends] - (0 if window is None else np.where(ends >= window, s[:, np.maximum(ends - window, 0)], 0))
    z = (sums / n - threshold) / np.sqrt(threshold * (1 - threshold) / n)
    rang = z < norm.ppf(ALPHA)
    return np.where(rang.any(axis=1), ends[rang.argmax(axis=1)], -1)


def methods(x: np.ndarray, threshold: float) -> dict[str, np.ndarray]:
    """Every method's first alarms on streams ``x``."""
    out = {name: first_alarms(x, threshold, *spec) for name, spec in DESIGNS.items()}
    out["z-test peeked after every batch (all labels)"] = z_alarms(x, threshold, None)
    out[f"z-test peeked after every batch (last {WINDOW})"] = z_alarms(x, threshold, WINDOW)
    return out


def type_one(args, rng) -> pd.DataFrame:
    """Share of drift-free streams that ever alarm, per true agreement >= A."""
    rows = []
    for p in (A, 0.85, 0.9):
        x = (rng.random((args.streams, args.length)) < p).astype(float)
        for name, at in methods(x, A).items():
            k = int((at >= 0).sum())
            lo, hi = wilson(k, len(at))
            rows.append({"true agreement": p, "method": name, "false alarm rate": k / len(at), "95% low": lo,
                         "95% high": hi, "valid (<= alpha)": "yes" if lo <= ALPHA else "NO"})  # fmt: skip
    return pd.DataFrame(rows)


def detection(args, rng) -> pd.DataFrame:
    """Delay after a drop in agreement, per good stretch and method."""
    rows = []
    for good, before, after in ((200, 0.9, 0.6), (1000, 0.9, 0.6), (1000, 0.85, 0.6), (2000, 0.81, 0.6)):
        x = np.concatenate([rng.random((args.streams, good)) < before, rng.random((args.streams, 1000)) < after],
                           axis=1).astype(float)  # fmt: skip
        for name, at in methods(x, A).items():
            rows.append(_delays(name, at, good) | {"good labels": good, "before": before, "after": after})
    return pd.DataFrame(rows)


def _delays(name: str, at: np.ndarray, change: int) -> dict:
    """Alarms before ``change``, the share caught after it, and the delay's quantiles (labels after it)."""
    early = at[(at >= 0) & (at < change)]
    late = at[(at >= change) | (at < 0)]
    caught = late[late >= 0] - change + 1
    q = np.percentile(caught, [10, 50, 90]) if caught.size else [np.nan] * 3
    return {"method": name, "alarm before change": early.size / at.size, "caught": caught.size / max(late.size, 1),
            "delay p10": q[0], "delay median": q[1], "delay p90": q[2],
            "delay mean": caught.mean() if caught.size else np.nan}  # fmt: skip


def coverage(args, rng) -> pd.DataFrame:
    """Share of streams whose confidence sequence holds the true mean at every n, and the final width."""
    rows = []
    for p in (0.5, A, 0.95):
        missed, low_missed, widths = 0, 0, []
        for _ in range(args.cs_streams):
            x = (rng.random(args.cs_length) < p).astype(float)
            lo, hi = hedged_cs(x, ALPHA, grid=200)
            missed += bool(np.any((lo > p) | (hi < p)))
            low_missed += bool(np.any(hi < p))
            widths.append(hi[-1] - lo[-1])
        n = args.cs_streams
        rows.append({"true mean": p, "streams": n, "labels": args.cs_length, "miss rate (some n)": missed / n,
                     "95% high": wilson(missed, n)[1], "upper bound < mean (a CS test's false alarm)": low_missed / n,
                     "final width": float(np.mean(widths))})  # fmt: skip
    return pd.DataFrame(rows)


def _swapped(name: str, rng, replays: int):
    """(values before the swap in each random order, swap row, threshold, what) of a bundled set."""
    if name == "mtbench":
        table = load_bundled("mtbench")
        good, labelled, judged = values_of(table, "agreement")
        keep = labelled & judged
        judge, human = table["judge"].to_numpy(object)[keep], table["human"].to_numpy(object)[keep]
        flip = rng.random((replays, keep.sum())) < 0.5
        random = rng.choice(np.array(["A", "B", "tie"], object), (replays, keep.sum()))
        bad = (np.where(flip, random, judge) == human).astype(float)
        return np.broadcast_to(good[keep], bad.shape), bad, 600, 0.6, "GPT-4 -> half its verdicts random"
    new, old = load_bundled("llmfao-gpt4"), load_bundled("llmfao-gpt3").set_index("id")
    good, labelled, judged = values_of(new, "agreement")
    bad = values_of(old.loc[new["id"]].reset_index(), "agreement")[0]
    keep = labelled & judged & np.isfinite(bad)
    return (np.broadcast_to(good[keep], (replays, keep.sum())), np.broadcast_to(bad[keep], (replays, keep.sum())),
            1000, 0.36, "GPT-4 -> GPT-3.5")  # fmt: skip


def bundled(args, rng) -> pd.DataFrame:
    """Replays of each bundled set in random orders with a judge swap at a row: alarms before, delay after."""
    rows = []
    for name in ("mtbench", "llmfao"):
        good, bad, swap, threshold, what = _swapped(name, rng, args.replays)
        orders = np.argsort(rng.random(good.shape), axis=1)
        x = np.where(np.arange(good.shape[1]) < swap, np.take_along_axis(good, orders, 1),
                     np.take_along_axis(bad, orders, 1))  # fmt: skip
        truth = (good[0].mean(), bad[:, :].mean())
        for method, at in methods(x, threshold).items():
            rows.append(_delays(method, at, swap) | {"set": name, "swap": what, "rows": good.shape[1], "swap at": swap,
                        "threshold": threshold, "agreement before": truth[0], "after": truth[1]})  # fmt: skip
    return pd.DataFrame(rows)


def example(rng):
    """One MT-Bench replay through :func:`monitor` (the API and its figure): the swap at row 600."""
    from puaudit_jax.quantify.plots import monitor_plot

    table = load_bundled("mtbench")
    table = table[table["human"] != "missing"].sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index()
    table["order"] = np.arange(len(table)) // 20  # batches of 20 labels
    late = np.arange(len(table)) >= 600
    flip = late & (rng.random(len(table)) < 0.5)
    table.loc[flip, "judge"] = rng.choice(["A", "B", "tie"], int(flip.sum()))
    result = monitor(table, MonitorConfig(order="order", threshold=0.6))
    monitor_plot(result, RESULTS / "monitor_mtbench_swap.png", title="MT-Bench replay: GPT-4, half random after 600")
    return result.report("mtbench (replayed, swap at row 600)")


def markdown(t1, det, cov, bund, ex, args, seconds) -> str:
    """results/monitor.md."""
    alarm = ex["alarm_at"]
    return "\n\n".join([
        "# `puaudit monitor`: false alarms, detection delay, coverage",
        f"`python -m experiments.reproductions.monitor` (seed {args.seed}, {seconds:.0f} s). Threshold A = {A}, "
        f"alpha = {ALPHA}; batches of {BATCH} labels for the peeked z-tests. E-process bets: aGRAPA on means "
        "discounted over `memory` labels; mixture: weights 1/(s(s+1)) over start times.",
        f"## Type-I error under optional stopping ({args.streams} streams of {args.length} labels, agreement >= A)",
        "Share of drift-free streams that ever alarm (95 % Wilson interval). An anytime-valid test stays <= "
        "alpha at every true agreement >= A; peeking at a fixed-n test does not.",
        markdown_table(t1),
        f"## Detection: agreement falls after a good stretch ({args.streams} streams, 1,000 labels after the change)",
        "Delay: labels after the change until the alarm, among the streams caught (alarms before the change are "
        "false alarms, counted apart).",
        markdown_table(det),
        f"## Coverage of the confidence sequence ({args.cs_streams} streams of {args.cs_length} labels, grid 200)",
        markdown_table(cov),
        f"## Bundled sets replayed with a judge swap ({args.replays} random orders each)",
        markdown_table(bund),
        "## One replay through `monitor()` (MT-Bench, swap at row 600, threshold 0.6)",
        f"Alarm at label {alarm['n'] if alarm else None} (order value {alarm['order'] if alarm else None}); "
        f"final agreement {ex['last']['estimate']:.3f} in [{ex['last']['lower']:.3f}, {ex['last']['upper']:.3f}]. "
        "Figure: `monitor_mtbench_swap.png`.",
    ]) + "\n"  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--length", type=int, default=2000)
    parser.add_argument("--cs-streams", type=int, default=1000)
    parser.add_argument("--cs-length", type=int, default=1000)
    parser.add_argument("--replays", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "monitor"))
    args = parser.parse_args(argv)
    rng, start = np.random.default_rng(args.seed), time.perf_counter()
    t1, det, bund = type_one(args, rng), detection(args, rng), bundled(args, rng)
    cov, ex = coverage(args, rng), example(rng)
    seconds = time.perf_counter() - start
    frames = {"type_one": t1, "detection": det, "coverage": cov, "bundled": bund}
    write_csv(pd.concat([f.assign(section=k) for k, f in frames.items()], ignore_index=True), f"{args.out}.csv")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_json({"settings": settings | {"threshold": A, "alpha": ALPHA, "batch": BATCH, "window": WINDOW},
                **{k: f.to_dict(orient="records") for k, f in frames.items()}, "example": ex, "seconds": seconds},
               f"{args.out}.json")  # fmt: skip
    write_text(markdown(t1, det, cov, bund, ex, args, seconds), f"{args.out}.md")
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 20):
        for name, frame in frames.items():
            print(f"\n{name}\n{frame.to_string(index=False, float_format='{:.3f}'.format)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
