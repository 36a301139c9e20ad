"""Trust, flip or escalate (``puaudit audit --guarantee``): violations and coverage on real judges.

    python -m experiments.reproductions.guarantee [--sets mtbench-local,mtbench,llmfao-gpt4,llmfao-gpt3]
        [--p-ratios 0.1,0.2,0.5] [--splits 100] [--agreements 0.8,0.85,0.9,0.95] [--delta 0.1]
        [--embeddings-dir DIR] [--out results]

Each set's human-labelled rows are the population. For every share of labels and random split (rows
drawn at random, per question type: the guarantee assumes a random sample of independent rows), the
labels of the other rows are hidden and the audit runs with a guarantee, once per signal its
P(judge wrong) may read, all calibrated the same way (half of the split's labels, fixed-sequence
binomial testing):

- ``audit``: every kind of evidence the set has (the default);
- ``confidence``: the judge's verdict strength alone; ``both orders``: its verdict with the responses
  swapped alone (SCOPE's signal); ``embedding``: the PU score alone;
- ``one sequence``: the audit's P(judge wrong), one fixed sequence from the strictest threshold (Jung
  et al.'s Alg. 1) instead of the default's five starts;
- ``plug-in``: the audit's P(judge wrong) with the naive threshold (the calibration agreement >= A, no
  finite-sample correction).

A split *violates* when the certified (trusted or flipped) pool rows agree with their hidden human
labels less than A of the time. The table gives, per set, share of labels, signal and A: the
violation frequency over the splits (target <= D within Monte-Carlo error), the mean share of the pool
certified, and the share of splits that certified anything. A signal the set lacks reads "n/a".
Writes ``results/guarantee.{csv,json,md}``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from experiments.common import RESULTS
from experiments.reproductions.judge_evidence import load_set
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig, run_audit
from puaudit_jax.audit.evidence import EVIDENCE_KINDS
from puaudit_jax.audit.guarantee import confidence, decisions, final_verdicts, plug_in, select
from puaudit_jax.datasets import item_status
from puaudit_jax.datasets.exclusions import LABELLED
from puaudit_jax.datasets.verdicts import MISSING
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

SETS = ("mtbench-local", "mtbench", "llmfao-gpt4", "llmfao-gpt3")
SIGNALS = {"audit": EVIDENCE_KINDS, "confidence": ("confidence",), "both orders": ("swapped",),
           "embedding": ("embedding",)}  # fmt: skip


def split_mask(table: pd.DataFrame, labelled: np.ndarray, share: float, rng) -> np.ndarray:
    """(n,) bool: a random ``share`` of each question type's labelled rows (at least one per type)."""
    keep = np.zeros(len(table), bool)
    types = table["question_type"].astype(str).to_numpy()
    for t in np.unique(types[labelled]):
        rows = np.flatnonzero(labelled & (types == t))
        keep[rng.choice(rows, max(1, round(share * len(rows))), replace=False)] = True
    return keep


def _outcomes(items: pd.DataFrame, truth: np.ndarray, agreements, delta: float, signal: str) -> list[dict]:
    """Per A, the certified share of the pool and the certified rows' agreement with the hidden truth."""
    role, judge = items["role"].to_numpy(), items["judge"].to_numpy(dtype=object)
    p, human = items["p_wrong"].to_numpy(float), items["human"].to_numpy(dtype=object)
    cal, pool = role == "calibration", (role == "U") & (truth != MISSING)
    if not np.isfinite(p[pool]).any():
        return [dict(signal=signal, A=a, available=False) for a in agreements]
    correct = final_verdicts(p[cal], judge[cal]) == human[cal]
    rows = []
    for a in agreements:
        q_cal, q_pool = confidence(p[cal]), confidence(p[pool])
        for name, t in ((signal, select(q_cal, correct, q_pool, a, delta).threshold),
                        ("one sequence", select(q_cal, correct, q_pool, a, delta, starts=()).threshold),
                        ("plug-in", plug_in(q_cal, correct, q_pool, a))):  # fmt: skip
            if name in ("one sequence", "plug-in") and signal != "audit":
                continue
            decision, final = decisions(p[pool], judge[pool], t)
            kept = decision != "escalate"
            agree = float(np.mean(final[kept] == truth[pool][kept])) if kept.any() else np.nan
            rows.append(dict(signal=name, A=a, available=True, coverage=float(kept.mean()), certified=bool(kept.any()),
                             agreement=agree, violated=bool(kept.any() and agree < a)))  # fmt: skip
    return rows


def run_split(table, emb, truth, keep, others, agreements, delta, seed) -> list[dict]:
    """Every signal's outcomes on one split (the labels of labelled rows outside ``keep`` hidden)."""
    hide = (truth != MISSING) & ~keep  # rows left out of the population (a human tie, ...) stay as they are
    hidden = table.assign(human=np.where(hide, MISSING, table["human"].to_numpy(dtype=object)))
    rows = []
    for signal, kinds in SIGNALS.items():
        config = AuditConfig(guarantee=min(agreements), delta=delta, evidence=kinds, other_judges=others, seed=seed)
        try:
            items = run_audit(hidden, emb, config).items
        except ValueError as err:  # too few labels for the guarantee at this share
            rows += [dict(signal=signal, A=a, available=False, note=str(err)[:80]) for a in agreements]
            continue
        rows += _outcomes(items, truth, agreements, delta, signal)
    return rows


def run_set(name: str, args) -> pd.DataFrame:
    """All shares and splits of one set: one row per (share, split, signal, A)."""
    table, others, _ = load_set(name, None)
    table = table.reset_index(drop=True)
    emb, _ = embeddings_for(name, table, args.embeddings_dir, "default")
    labelled = item_status(table)["status"].to_numpy() == LABELLED
    truth = np.where(labelled, table["human"].to_numpy(dtype=object), MISSING)
    frames = []
    for share in args.p_ratios:
        t0, rng = time.perf_counter(), np.random.default_rng([args.seed, int(share * 1000)])
        for split in tqdm(range(args.splits), desc=f"{name} {share:.0%}", leave=False):
            keep = split_mask(table, labelled, share, rng)
            rows = run_split(table, emb, truth, keep, others, args.agreements, args.delta, split)
            frames.append(pd.DataFrame(rows).assign(set=name, p_ratio=share, split=split,
                                                    judge_agreement=float(np.mean(table.judge[labelled] ==
                                                                                  truth[labelled]))))  # fmt: skip
        print(f"{name} {share:.0%}: {time.perf_counter() - t0:.0f}s", flush=True)
    return pd.concat(frames, ignore_index=True)


def summary(runs: pd.DataFrame, delta: float) -> pd.DataFrame:
    """Per set, share, signal and A: violation frequency (with its Monte-Carlo bound), coverage, splits certified."""
    ok = runs[runs.available.astype(bool)]
    out = ok.groupby(["set", "p_ratio", "signal", "A"], sort=False).agg(
        splits=("violated", "size"), violations=("violated", "mean"), coverage=("coverage", "mean"),
        any_certified=("certified", "mean"), judge_agreement=("judge_agreement", "first"))  # fmt: skip
    out["bound"] = delta + 3 * np.sqrt(delta * (1 - delta) / out["splits"])
    return out.reset_index()


def markdown(table: pd.DataFrame) -> str:
    """Cells "violations / mean coverage" per (set, share, A) row and signal column."""
    table = table.assign(cell=[f"{r.violations:.2f} / {r.coverage:.2f}" for r in table.itertuples()])
    wide = table.pivot_table(index=["set", "judge_agreement", "p_ratio", "A"], columns="signal", values="cell",
                             aggfunc="first", sort=False).reset_index()  # fmt: skip
    order = ["audit", "one sequence", "confidence", "both orders", "embedding", "plug-in"]
    wide = wide[[c for c in ["set", "judge_agreement", "p_ratio", "A", *order] if c in wide.columns]].fillna("n/a")
    wide["judge_agreement"] = wide["judge_agreement"].map(lambda v: f"{v:.3f}")
    return markdown_table(wide)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--p-ratios", default="0.1,0.2,0.5", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--agreements", default="0.8,0.85,0.9,0.95", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--splits", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    runs = pd.concat([run_set(name, args) for name in args.sets.split(",")], ignore_index=True)
    table, out = summary(runs, args.delta), Path(args.out)
    write_csv(runs, out / "guarantee_runs.csv")
    write_csv(table, out / "guarantee.csv")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_json({"settings": settings, "summary": table.replace({np.nan: None}).to_dict(orient="records")},
               out / "guarantee.json")  # fmt: skip
    text = (f"Violation frequency / mean share of the pool certified, over {args.splits} random splits per row "
            f"(delta {args.delta}; a violation: the certified rows agree with the hidden labels less than A).\n\n"
            + markdown(table) + "\n")  # fmt: skip
    write_text(text, out / "guarantee.md")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
