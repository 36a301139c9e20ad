"""Does ``--guarantee`` notice labels that are not a random sample? Selections the data can show, on real judges.

    python -m experiments.reproductions.sample_checks [--draws 40] [--share 0.3] [--embeddings-dir DIR]
        [--out results]

LLMFAO's GPT-4 verdicts with GPT-3.5's as a second judge (``--other-judges gpt3``), the human-labelled
rows as the population. Per draw, a share of them keeps its label and the audit runs with a guarantee
(A = 0.8, D = 0.1); the rest are the pool. Four ways to pick the labelled rows:

- ``random``: a random share per question type (the guarantee's assumption; a check that fires here is a
  false alarm);
- ``second judge agrees``: only rows where GPT-3.5 agrees with GPT-4 (the agreement is 100 %
  among labelled rows and far lower in the pool);
- ``judge said B``: only rows where GPT-4 said B (the chi-square check by verdict sees it);
- ``copycat cascade``: random labels, and a cascade to a second "judge" that copies the human label where
  there is one and guesses elsewhere (the guarantee used to certify rows it agreed with 46-75 % of the
  time).

Per way: the share of draws flagged (the guarantee does not apply; every pool row escalated), which check
fired, and, where the guarantee still applied, the agreement of the certified rows with their hidden
labels. Writes ``results/sample_checks.{md,csv}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import RESULTS
from experiments.reproductions.guarantee import load_set, masking
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig, run_audit
from puaudit_jax.datasets import item_status
from puaudit_jax.datasets.exclusions import LABELLED
from puaudit_jax.datasets.verdicts import MISSING, question_types
from puaudit_runtime.files import markdown_table, write_csv, write_text

WAYS = ("random", "second judge agrees", "judge said B", "copycat cascade")


def labelled_rows(way: str, table, labelled, types, share, rng) -> np.ndarray:
    """(n,) bool, the rows that keep their label under ``way`` (module docstring)."""
    judge, second = table["judge"].to_numpy(dtype=object), table["gpt3"].to_numpy(dtype=object)
    if way == "second judge agrees":
        return masking(types, labelled & (second == judge), share, rng) & labelled & (second == judge)
    if way == "judge said B":
        return masking(types, labelled & (judge == "B"), share, rng) & labelled & (judge == "B")
    return masking(types, labelled, share, rng) & labelled


def run_draw(way: str, table, emb, labelled, truth, types, share, seed) -> dict:
    """One draw: whether the guarantee applied, the checks that fired, the certified rows' agreement."""
    rng = np.random.default_rng([seed, WAYS.index(way)])
    keep = labelled_rows(way, table, labelled, types, share, rng)
    human = table["human"].to_numpy(dtype=object)
    shown = table.assign(human=np.where((truth != MISSING) & ~keep, MISSING, human))  # human ties stay as they are
    config = AuditConfig(guarantee=0.8, other_judges=("gpt3",), seed=seed)
    if way == "copycat cascade":
        copy = np.where(keep, truth, rng.choice(np.array(["A", "B"], dtype=object), len(table)))
        shown = shown.assign(copycat=np.where(truth == MISSING, shown["judge"], copy))
        config = AuditConfig(guarantee=0.8, other_judges=("copycat",), cascade=True, seed=seed)
    result = run_audit(shown, emb, config)
    g, items = result.report.guarantee, result.items
    fired = [getattr(c, "by", "") for c in result.report.sample_checks if c.warning]
    pool = (items["role"].to_numpy() == "U") & (truth != MISSING)
    kept = pool & np.isin(items["decision"].to_numpy(dtype=object), ("trust", "flip"))
    agree = float(np.mean(items["adjusted"].to_numpy(dtype=object)[kept] == truth[kept])) if kept.any() else np.nan
    return dict(way=way, draw=seed, flagged=not g.applies, fired=",".join(fired), coverage=g.coverage,
                certified_agreement=agree)  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--draws", type=int, default=40)
    p.add_argument("--share", type=float, default=0.3)
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    table, _ = load_set("llmfao-gpt4", None)
    emb, _ = embeddings_for("llmfao-gpt4", table, args.embeddings_dir, "default")
    labelled = item_status(table)["status"].to_numpy() == LABELLED
    truth = np.where(labelled, table["human"].to_numpy(dtype=object), MISSING)
    types = question_types(table["question_type"]).astype(str)
    runs = pd.DataFrame([run_draw(way, table, emb, labelled, truth, types, args.share, seed)
                         for way in WAYS for seed in range(args.draws)])  # fmt: skip
    out = runs.groupby("way", sort=False).agg(
        draws=("flagged", "size"), flagged=("flagged", "mean"), coverage=("coverage", "mean"),
        certified_agreement=("certified_agreement", "mean"),
        checks=("fired", lambda v: ", ".join(sorted({c for cell in v for c in cell.split(",") if c}))),
    ).reset_index()  # fmt: skip
    write_csv(runs, Path(args.out) / "sample_checks.csv")
    text = (f"LLMFAO GPT-4 with GPT-3.5 as a second judge; {args.share:.0%} of the labelled rows keep their label, "
            f"{args.draws} draws per way; A = 0.8, D = 0.1. flagged: share of draws where the guarantee does not "
            "apply (every pool row escalated); coverage and certified_agreement: mean over draws (agreement over "
            "the draws that certified something).\n\n" + markdown_table(out.round(3)) + "\n")  # fmt: skip
    write_text(text, Path(args.out) / "sample_checks.md")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
