"""Does the #1 survive dropping a handful of votes? ``quantify --robustness`` on the bundled sets, and its speed.

Broderick et al. (arXiv:2508.11847) drop 2 of 57,477 Chatbot Arena votes and the #1 changes; MT-Bench's
expert ranking is more robust. Here: for MT-Bench (GPT-4 judge, expert votes) and LLMFAO (crowd votes;
GPT-4 and GPT-3.5 judges, the 1,097 unlabelled pairs included so that PPI++ has an unlabelled side),
every estimator's Bradley-Terry leaderboard (judge only, human only, PPI++): the fewest comparisons
whose removal changes the #1 and each adjacent pair (:mod:`puaudit_jax.quantify.robustness`: the
first-order influence of every comparison, confirmed and corrected by refits). Then how close the
search comes to the true fewest on small random sets (4 models, 36 comparisons: every subset of up to
``--brute`` comparisons refitted, one vmapped call per size), and the time of the whole search on a
synthetic set of 100,000 comparisons (20 models, 10 % labelled), on this CPU.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.robustness   # ~3 min

Writes results/robustness.{md,csv} (the csv: every row of every set, ids included).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd

from experiments.common import RESULTS, load_average, machine
from puaudit_jax.datasets import load_bundled
from puaudit_jax.quantify import HUMAN_ONLY, quantify
from puaudit_jax.quantify.leaderboard import contrast, design
from puaudit_jax.quantify.m_estimation import ppi_logistic_splits
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


def linked(a: np.ndarray, b: np.ndarray, keep: np.ndarray, k: int) -> np.ndarray:
    """(S,) whether the kept (S, n) comparisons of models a, b (n,) (codes < k) link every model."""
    edges = np.zeros((len(a), k, k))
    edges[np.arange(len(a)), a, b] = edges[np.arange(len(a)), b, a] = 1
    adjacent = np.einsum("sn,nij->sij", keep, edges) > 0
    reach = np.zeros((keep.shape[0], k), bool)
    reach[:, 0] = True
    for _ in range(k):
        reach = reach | np.einsum("si,sij->sj", reach, adjacent)
    return reach.all(1)


def brute_force(table: pd.DataFrame, upto: int) -> int | None:
    """The fewest labelled comparisons whose removal changes the human-only #1 (sizes 1..upto; None: more).

    Every subset refitted by the package's own M-estimation (:func:`ppi_logistic_splits`, lam = 0), a
    refit counting as in :mod:`puaudit_jax.quantify.robustness`: converged, |theta| < 30, every model linked.
    """
    models = sorted(set(table["model_a"]) | set(table["model_b"]))
    a, b = (table[c].map(models.index).to_numpy() for c in ("model_a", "model_b"))
    y = table["human"].map({"A": 1.0, "B": 0.0, "tie": 0.5}).to_numpy()
    X, c, n = design(table["model_a"], table["model_b"], models), contrast(len(models)), len(y)
    theta = c @ ppi_logistic_splits(X, y, y, np.ones((1, n), bool), np.zeros((1, n), bool), lam=0.0)[0][0]
    leader = int(np.argmax(theta))
    for size in range(1, upto + 1):
        subsets = np.array(list(itertools.combinations(range(n), size)))
        keep = np.ones((len(subsets), n), bool)
        keep[np.arange(len(subsets))[:, None], subsets] = False
        beta, _, _, ok = ppi_logistic_splits(X, y, y, keep, np.zeros_like(keep), lam=0.0)
        theta = beta @ c.T
        ok = ok & (np.abs(beta).max(1) < 30) & linked(a, b, keep, len(models))
        if (ok & (np.delete(theta, leader, 1).max(1) >= theta[:, leader] - 1e-9)).any():
            return size
    return None


def accuracy(sets: int, upto: int) -> pd.DataFrame:
    """The search's human-only #1 count against brute force on ``sets`` random 4-model sets of 36 comparisons."""
    rows = []
    for seed in range(sets):
        table = synthetic(36, 4, 1.0, seed)
        row = next(r for r in quantify(table, robustness=True, style=()).robustness.rows
                   if r.estimator == HUMAN_ONLY and r.target.startswith("#1"))  # fmt: skip
        if row.dropped is None:  # not estimable (a model that never lost, say): nothing to compare
            rows.append({"seed": seed, "search": None, "first_order": None, "verified": False, "brute_force": row.note})
            continue
        searched = min(row.dropped, upto)
        fewest = brute_force(table, searched)
        rows.append({"seed": seed, "search": row.dropped, "first_order": row.first_order, "verified": row.verified,
                     "brute_force": fewest if fewest is not None else f"> {searched}"})  # fmt: skip
    return pd.DataFrame(rows).astype({"search": "Int64", "first_order": "Int64"})


def timing(rows: int, models: int, seed: int) -> tuple[float, pd.DataFrame]:
    """Seconds of :func:`table_robustness` on a synthetic set (the fits and every search), and its rows."""
    table = synthetic(rows, models, 0.1, seed)
    start = time.perf_counter()
    result = table_robustness(table, inputs(table, 0.9))
    return time.perf_counter() - start, result.to_frame()


def accuracy_text(acc: pd.DataFrame, upto: int) -> str:
    """The accuracy table and its tally: exact, one over, more (where brute force could tell)."""
    counted = acc[acc["search"].notna()]
    known = counted[counted["brute_force"].map(lambda v: isinstance(v, (int, np.integer)))]
    over = known["search"].astype(int) - known["brute_force"].astype(int)
    rest = counted.loc[~counted.index.isin(known.index), "search"].astype(int)
    exact = int((over == 0).sum() + (rest == upto + 1).sum())  # none of <= upto flips, the search needs upto + 1
    beyond = ", ".join(map(str, rest))
    tally = (f"{len(acc)} sets, {len(counted)} with a count. Where brute force found the fewest ({len(known)}): "
             f"the search's count equals it in {int((over == 0).sum())}, is one over in {int((over == 1).sum())}, "
             f"more in {int((over > 1).sum())}. In {len(counted) - len(known)} the fewest exceeds {upto} (the "
             f"search found {beyond or '-'}). Exact in all: {exact} of {len(counted)}.")  # fmt: skip
    return tally + "\n\n" + markdown_table(acc)


def markdown(frame: pd.DataFrame, seconds: float, synth: pd.DataFrame, acc: pd.DataFrame, args) -> str:
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
        f"## The search against brute force (human only, 4 models, 36 comparisons, subsets of <= {args.brute})", "",
        accuracy_text(acc, args.brute), "",
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
    parser.add_argument("--sets", type=int, default=20, help="random small sets checked by brute force")
    parser.add_argument("--brute", type=int, default=4, help="largest subset size of the brute force")
    parser.add_argument("--out", default=str(RESULTS / "robustness"))
    args = parser.parse_args(argv)
    frame = pd.concat([run_set(label, *spec) for label, spec in SETS.items()], ignore_index=True)
    acc = accuracy(args.sets, args.brute)
    print(accuracy_text(acc, args.brute), flush=True)
    seconds, synth = timing(args.rows, args.models, args.seed)
    print(f"{args.rows:,} synthetic comparisons, {args.models} models: {seconds:.1f} s", flush=True)
    write_csv(frame, f"{args.out}.csv")
    write_text(markdown(frame, seconds, synth, acc, args), f"{args.out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
