"""Does the #1 survive dropping a handful of votes? ``quantify --robustness`` on the bundled sets, and its speed.

Broderick et al. (arXiv:2508.11847) drop 2 of 57,477 Chatbot Arena votes and the #1 changes; MT-Bench's
expert ranking is more robust. Here: for MT-Bench (GPT-4 judge, expert votes) and LLMFAO (crowd votes;
GPT-4 and GPT-3.5 judges, the 1,097 unlabelled pairs included so that PPI++ has an unlabelled side),
every estimator's Bradley-Terry leaderboard (judge only, human only, PPI++): the fewest comparisons
whose removal changes the #1 and each adjacent pair (:mod:`puaudit_jax.quantify.robustness`: the
first-order influence of every comparison, confirmed and corrected by refits). Then the time of the
whole search on a synthetic set of 100,000 comparisons (20 models, 10 % labelled), on this CPU.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.robustness   # ~3 min

Writes results/robustness.{md,csv} (the csv: every row of every set, ids included).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from experiments.common import RESULTS, load_average, machine
from puaudit_jax.datasets import load_bundled
from puaudit_jax.quantify import quantify
from puaudit_jax.quantify.robustness import table_robustness
from puaudit_jax.quantify.targets import inputs
from puaudit_runtime.files import markdown_table, write_csv, write_text

SETS = {"mtbench (GPT-4)": ("mtbench", None), "llmfao (GPT-4)": ("llmfao-gpt4", True),
        "llmfao (GPT-3.5)": ("llmfao-gpt3", True)}  # fmt: skip


def run_set(label: str, name: str, include) -> pd.DataFrame:
    """Every robustness row of one bundled set, with the set's name and the seconds it took."""
    table = load_bundled(name, include_unlabelled=include)
    start = time.perf_counter()
    result = quantify(table, robustness=True, style=())
    seconds = time.perf_counter() - start
    print(f"{label}: {len(table):,} rows, quantify with robustness {seconds:.1f} s", flush=True)
    for line in result.robustness.summary():
        print("  " + line, flush=True)
    return result.robustness.to_frame().assign(set=label, seconds=seconds)


def synthetic(rows: int, models: int, labelled: float, seed: int) -> pd.DataFrame:
    """``rows`` comparisons of ``models`` with normal(0, 0.5) BT strengths; the judge right 80 % of the time."""
    rng = np.random.default_rng(seed)
    names = np.array([f"m{k:02d}" for k in range(models)])
    strength = rng.normal(0, 0.5, models)
    a = rng.integers(0, models, rows)
    b = (a + rng.integers(1, models, rows)) % models
    human = np.where(rng.random(rows) < 1 / (1 + np.exp(-(strength[a] - strength[b]))), "A", "B")
    judge = np.where(rng.random(rows) < 0.8, human, np.where(human == "A", "B", "A"))
    shown = np.where(rng.random(rows) < labelled, human, "missing")
    return pd.DataFrame({"id": [f"r{i}" for i in range(rows)], "judge": judge, "human": shown,
                         "model_a": names[a], "model_b": names[b]})  # fmt: skip


def timing(rows: int, models: int, seed: int) -> tuple[float, pd.DataFrame]:
    """Seconds of :func:`table_robustness` on a synthetic set (the fits and every search), and its rows."""
    table = synthetic(rows, models, 0.1, seed)
    start = time.perf_counter()
    result = table_robustness(table, inputs(table, 0.9))
    return time.perf_counter() - start, result.to_frame()


def markdown(frame: pd.DataFrame, seconds: float, synth: pd.DataFrame, args) -> str:
    top = frame[frame["target"].str.startswith("#1")].assign(
        share=lambda f: (100 * f["share"]).round(2), model=lambda f: f["target"].str.removeprefix("#1: ")
    )
    pairs = frame[~frame["target"].str.startswith("#1")]
    weakest = pairs.sort_values("dropped", kind="stable").groupby(["set", "estimator"], sort=False).head(1)
    weakest = weakest.sort_values("set", key=lambda s: s.map(list(SETS).index), kind="stable")
    cols = ["set", "estimator", "model", "dropped", "comparisons", "share", "verified", "overtaken_by",
            "first_order", "refits", "note"]  # fmt: skip
    synth_top = synth[synth["target"].str.startswith("#1")][["estimator", "target", "dropped", "comparisons",
                                                              "verified", "first_order", "refits"]]  # fmt: skip
    verified = int(synth["verified"].sum())
    load = ", ".join(f"{v:.1f}" for v in load_average())
    return "\n".join([
        "# Does the #1 survive dropping a handful of comparisons?", "",
        "`python -m experiments.reproductions.robustness` (`quantify(table, robustness=True)`; "
        "`puaudit quantify DATA --robustness`). dropped: the fewest comparisons whose removal changes "
        "the #1 that the search found (first-order influence, confirmed by refit: verified); share in %; "
        "first_order: the count of the first-order approximation alone; overtaken_by: the challenger.", "",
        "## The #1 of each leaderboard", "", markdown_table(top[cols]), "",
        "## The most fragile adjacent pair of each leaderboard", "",
        markdown_table(weakest[["set", "estimator", "target", "dropped", "comparisons", "verified"]]), "",
        f"## Speed: {args.rows:,} synthetic comparisons, {args.models} models, 10 % labelled", "",
        f"table_robustness (every fit, {len(synth)} targets over 3 estimators, {verified} verified): "
        f"**{seconds:.1f} s** on {machine()['cpu']} (OMP_NUM_THREADS=1; load average {load} on a "
        "shared machine).", "", markdown_table(synth_top), "",
    ]) + "\n"  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="comparisons of the timing run")
    parser.add_argument("--models", type=int, default=20, help="models of the timing run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "robustness"))
    args = parser.parse_args(argv)
    frame = pd.concat([run_set(label, *spec) for label, spec in SETS.items()], ignore_index=True)
    seconds, synth = timing(args.rows, args.models, args.seed)
    print(f"{args.rows:,} synthetic comparisons, {args.models} models: {seconds:.1f} s", flush=True)
    write_csv(frame, f"{args.out}.csv")
    write_text(markdown(frame, seconds, synth, args), f"{args.out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
