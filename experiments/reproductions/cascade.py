"""A cascade of judges with one guarantee (``puaudit audit --guarantee A --other-judges J --cascade``).

    python -m experiments.reproductions.cascade [--p-ratios 0.2,0.5] [--splits 30]
        [--agreements 0.65,0.7,0.75,0.8] [--delta 0.1] [--embeddings-dir DIR] [--out results]

LLMFAO's 2,139 pairs were judged by GPT-3.5 and by GPT-4 (the bundled ``llmfao-gpt3`` and
``llmfao-gpt4``: the same pairs, the same human votes). The cheap judge goes first: rows it is
certified for need no GPT-4 call; GPT-4 takes the rows it is certified for among the rest; a human
gets what is left. Each split hides the human verdicts of all labelled rows but a random share (per
question type); the audits run with a guarantee at every A (the thresholds are recomputed from the
candidates of each judge rebuilt from the audits' items and certified by the library's
:func:`~puaudit_jax.audit.guarantee.certify`, as ``--guarantee`` does: each judge's label-free score,
tested on every label, and its audit's P(judge wrong), tested on the half hidden from the audit).
Compared side by side:

- ``GPT-3.5 alone`` and ``GPT-4 alone``: each judge with a guarantee by itself (its own audit, no
  other judge as evidence);
- ``cascade``: GPT-3.5, then GPT-4 (whose audit weighs GPT-3.5's verdict), then a human.

A split *violates* when the certified rows agree with their hidden labels less than A. The table
gives, per share and A: violation frequency, mean coverage (share of the pool certified), and for the
cascade the share of the pool decided by GPT-3.5 (no GPT-4 call needed) and by GPT-4. Writes
``results/cascade.{csv,json,md}``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from experiments.common import RESULTS
from experiments.reproductions.guarantee import masking
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig, run_audit
from puaudit_jax.audit import guarantee as g
from puaudit_jax.audit.evidence import label_free_score
from puaudit_jax.datasets import load_bundled
from puaudit_jax.datasets.exclusions import LABELLED
from puaudit_jax.datasets.verdicts import MISSING, question_types
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

CHEAP, STRONG = "GPT-3.5", "gpt4"  # the table's judge column holds GPT-3.5; the column "gpt4" GPT-4


def cascade_table() -> pd.DataFrame:
    """LLMFAO with GPT-3.5's verdicts as the judge's and GPT-4's in the column ``gpt4`` (same ids, same votes)."""
    cheap, strong = load_bundled("llmfao-gpt3"), load_bundled("llmfao-gpt4")
    if not (cheap["id"].to_numpy() == strong["id"].to_numpy()).all() or not cheap["human"].equals(strong["human"]):
        raise ValueError("the bundled LLMFAO sets no longer hold the same pairs and votes")
    return cheap.assign(gpt4=strong["judge"].to_numpy()).reset_index(drop=True)


def _stage(name: str, table: pd.DataFrame, items: pd.DataFrame, p_column: str, others: tuple, roles) -> g.Stage:
    """A judge's :class:`~puaudit_jax.audit.guarantee.Stage` (label-free and fitted candidates) from its items."""
    judge = table["judge"].to_numpy(dtype=object)
    p = items[p_column].to_numpy(float)
    score = label_free_score(table, others, ("others",))
    return g.Stage(name, judge, g.judge_candidates(g.CERTIFY["auto"], score, p, judge, roles), p)


def _roles(items: pd.DataFrame, labelled: np.ndarray) -> g.RowRoles:
    """The guarantee's row roles of an audit's items (``labelled``: the rows the split kept a label on)."""
    role = items["role"].to_numpy()
    hidden = np.flatnonzero(role == "calibration")
    empty = np.zeros(0, int)
    return g.RowRoles(hidden, np.flatnonzero(labelled), np.flatnonzero(role == "U"), empty, empty)


def _outcome(stages, roles, truth, agreement, delta) -> dict:
    """Coverage, realised agreement and who decided, of the cascade of ``stages`` at A on one split."""
    out = g.certify(stages, roles, truth, g.Settings(agreement, delta))
    pool = roles.pool[truth[roles.pool] != MISSING]
    kept = pool[out.stage[pool] >= 0]
    agree = float(np.mean(out.final[kept] == truth[kept])) if len(kept) else np.nan
    result = dict(coverage=len(kept) / len(pool), agreement=agree, violated=bool(len(kept) and agree < agreement))
    result.update({f"by_{k}": float(np.mean(out.stage[pool] == k)) for k in range(len(stages))})
    return result


def run_split(table, emb, truth, keep, agreements, delta, seed) -> list[dict]:
    """Both judges alone and the cascade on one split, at every A."""
    hide = (truth != MISSING) & ~keep
    shown = table.assign(human=np.where(hide, MISSING, table["human"].to_numpy(dtype=object)))
    base = AuditConfig(guarantee=min(agreements), delta=delta, seed=seed)
    try:
        chain = run_audit(shown, emb, replace(base, other_judges=(STRONG,), cascade=True))
        alone = run_audit(shown.assign(judge=shown[STRONG]), emb, base)
    except ValueError as err:  # too few labels for the guarantee at this share
        return [dict(method=m, A=a, available=False, note=str(err)[:80]) for a in agreements
                for m in (f"{CHEAP} alone", "GPT-4 alone", "cascade")]  # fmt: skip
    roles, alone_roles = _roles(chain.items, keep), _roles(alone.items, keep)
    strong_table = shown.assign(judge=shown[STRONG], cheap=shown["judge"])
    cheap = _stage("judge", shown, chain.items, "p_wrong", (), roles)
    strong = _stage(STRONG, strong_table, chain.items, f"p_wrong[{STRONG}]", ("cheap",), roles)
    strong_alone = _stage("judge", strong_table, alone.items, "p_wrong", (), alone_roles)
    rows = []
    for a in agreements:
        for method, stages, rr in ((f"{CHEAP} alone", [cheap], roles), ("GPT-4 alone", [strong_alone], alone_roles),
                                   ("cascade", [cheap, strong], roles)):  # fmt: skip
            rows.append(dict(method=method, A=a, available=True, **_outcome(stages, rr, truth, a, delta)))
    return rows


def summary(runs: pd.DataFrame, delta: float) -> pd.DataFrame:
    """Per share, A and method: violation frequency (and its Monte-Carlo bound), coverage, who decided."""
    ok = runs[runs.available.astype(bool)]
    out = ok.groupby(["p_ratio", "A", "method"], sort=False).agg(
        splits=("violated", "size"), violations=("violated", "mean"), coverage=("coverage", "mean"),
        by_cheap=("by_0", "mean"), by_strong=("by_1", "mean"))  # fmt: skip
    out["bound"] = delta + 3 * np.sqrt(delta * (1 - delta) / out["splits"])
    return out.reset_index()


def markdown(table: pd.DataFrame) -> str:
    """Cells "violations / coverage" per method; the cascade's split of the pool between the judges."""
    cell = [f"{r.violations:.2f} / {r.coverage:.2f}" for r in table.itertuples()]
    wide = table.assign(cell=cell).pivot_table(index=["p_ratio", "A"], columns="method", values="cell",
                                               aggfunc="first", sort=False)  # fmt: skip
    chain = table[table.method == "cascade"].set_index(["p_ratio", "A"])
    wide["cascade: GPT-3.5 / GPT-4 / human"] = [
        f"{r.by_cheap:.2f} / {r.by_strong:.2f} / {1 - r.coverage:.2f}" for r in chain.loc[wide.index].itertuples()
    ]
    return markdown_table(wide.reset_index())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--p-ratios", default="0.2,0.5", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--agreements", default="0.65,0.7,0.75,0.8", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--splits", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    table = cascade_table()
    # every row either judge gave a verdict on (a row one judge called a tie is the other's to decide)
    emb, _ = embeddings_for("llmfao-cascade", table.assign(judge="A"), args.embeddings_dir, "default")
    labelled = g.cascade_status(table, (STRONG,)) == LABELLED  # where GPT-3.5 tied, GPT-4's verdict counts
    truth = np.where(labelled, table["human"].to_numpy(dtype=object), MISSING)
    frames = []
    for share in args.p_ratios:
        t0, rng = time.perf_counter(), np.random.default_rng([args.seed, int(share * 1000)])
        for split in tqdm(range(args.splits), desc=f"LLMFAO {share:.0%}", leave=False):
            keep = masking(question_types(table["question_type"]).astype(str), labelled, share, rng) & labelled
            rows = run_split(table, emb, truth, keep, args.agreements, args.delta, split)
            frames.append(pd.DataFrame(rows).assign(p_ratio=share, split=split))
        print(f"{share:.0%}: {time.perf_counter() - t0:.0f}s", flush=True)
    runs = pd.concat(frames, ignore_index=True)
    agreement = {name: float(np.mean(table[col].to_numpy()[labelled] == truth[labelled]))
                 for name, col in ((CHEAP, "judge"), ("GPT-4", STRONG))}  # fmt: skip
    result, out = summary(runs, args.delta), Path(args.out)
    write_csv(runs, out / "cascade_runs.csv")
    write_csv(result, out / "cascade.csv")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_json({"settings": settings, "judge_agreement": agreement,
                "summary": result.replace({np.nan: None}).to_dict(orient="records")}, out / "cascade.json")  # fmt: skip
    text = (f"LLMFAO, {int(labelled.sum())} rows with a human majority; the judges agree with it on "
            + ", ".join(f"{v:.1%} ({k})" for k, v in agreement.items())
            + f". Violation frequency / mean share of the pool certified over {args.splits} random splits per row "
            f"(delta {args.delta}; Monte-Carlo bound {result['bound'].max():.2f}), and how the cascade split the "
            "pool.\n\n" + markdown(result) + "\n")  # fmt: skip
    write_text(text, out / "cascade.md")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
