"""Question-type prediction of the LocalJudge (seed Figure 10's ``[[TYPE:X]]``) on MT-Bench.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.local_judge_types [--per-type 30]
        [--max-length 2048]

Rows: one expert-labelled pair per MT-Bench question (its first turn-1 row, else its first row)
among the rows of ``experiments.reproductions.local_judge_mtbench`` (same ``--per-type`` and ``--seed``, so the
verdict log-probabilities come from the same cache). The judge writes its verdict line and opens
``[[TYPE:``; the type is the most likely of "A".."F" (``LocalJudge(predict_type=True)``).

MT-Bench's eight categories are not the paper's six types. Expected letters where the mapping is
unambiguous: coding -> A (Programming), math and reasoning -> B (Math or logical reasoning),
stem and humanities -> C (Factual or knowledge-based), writing -> D (Writing / creative);
extraction and roleplay have no single seed type and count only in the confusion table.
Baselines on the same rows: the most frequent expected letter, and always the judge's most
frequent letter. Writes ``results/local_judge/mtbench_types.csv`` (one row per question: id,
question_id, category, expected, predicted, logp_type A..F) and ``mtbench_types.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.reproductions.local_judge_mtbench import expert_rows, rows_parser
from puaudit_jax.judges import row_inputs
from puaudit_jax.judges.base import QUESTION_TYPES
from puaudit_jax.judges.local import LocalJudge
from puaudit_runtime.files import write_csv, write_json

EXPECTED = {"coding": "A", "math": "B", "reasoning": "B", "stem": "C", "humanities": "C", "writing": "D"}


def one_per_question(rows: pd.DataFrame) -> pd.DataFrame:
    """The first turn-1 row of each question_id (its first row if it has no turn-1 row)."""
    ordered = rows.assign(_t=(rows.turn != 1).astype(int)).sort_values(["question_id", "_t", "id"])
    return ordered.groupby("question_id", sort=True).head(1).drop(columns="_t").reset_index(drop=True)


def main(argv=None) -> int:
    args = rows_parser(__doc__, per_type=30).parse_args(argv)
    rows = one_per_question(expert_rows(args.per_type, args.seed))
    print(f"{len(rows)} MT-Bench questions (one expert-labelled pair each)", file=sys.stderr)
    judge = LocalJudge("smollm2", max_length=args.max_length, cache_dir=args.cache_dir, predict_type=True)
    t0 = time.perf_counter()
    verdicts = judge.judge_many([row_inputs(r) for r in rows.to_dict("records")], progress=True)
    wall = time.perf_counter() - t0
    logp = np.asarray([v.details["logp_type"] for v in verdicts])
    out = pd.DataFrame(
        {
            "id": rows.id,
            "question_id": rows.question_id,
            "category": rows.question_type,
            "expected": rows.question_type.map(EXPECTED),
            "predicted": [v.question_type for v in verdicts],
        }
    )
    for j, letter in enumerate(QUESTION_TYPES):
        out[f"logp_{letter}"] = logp[:, j]
    write_csv(out, Path(args.out) / "mtbench_types.csv")

    mapped = out[out.expected.notna()]
    confusion = pd.crosstab(out.category, out.predicted).reindex(columns=list(QUESTION_TYPES), fill_value=0)
    majority_expected = mapped.expected.value_counts().idxmax()
    majority_predicted = out.predicted.value_counts().idxmax()
    summary = {
        "data": "mtbench (bundled): one expert-labelled pair per question among local_judge_mtbench's rows",
        "questions": len(out),
        "mapped_questions": len(mapped),
        "per_type": args.per_type,
        "seed": args.seed,
        "mapping": EXPECTED,
        "judge": judge.name,
        "max_length": judge.max_length,
        "accuracy": float((mapped.predicted == mapped.expected).mean()),
        "baseline_majority_expected": {
            "letter": majority_expected,
            "accuracy": float((mapped.expected == majority_expected).mean()),
        },
        "baseline_judges_majority_letter": {
            "letter": majority_predicted,
            "accuracy": float((mapped.expected == majority_predicted).mean()),
        },
        "predicted_share": {k: float(v) for k, v in out.predicted.value_counts(normalize=True).items()},
        "confusion": {c: {k: int(v) for k, v in r.items()} for c, r in confusion.iterrows()},
        "timing": {
            "wall_s": wall,
            "forward_passes": judge.stats["forward_passes"],
            "cache_hits": judge.stats["cache_hits"],
            "forward_s": judge.stats["forward_seconds"],
        },
    }
    write_json(summary, Path(args.out) / "mtbench_types.json")
    print(confusion.to_string())
    print(
        f"type accuracy on the {len(mapped)} mapped questions: {summary['accuracy']:.3f} (most frequent "
        f"expected letter {majority_expected}: {summary['baseline_majority_expected']['accuracy']:.3f}; the "
        f"judge says {majority_predicted} for {summary['predicted_share'][majority_predicted]:.0%} of questions)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
