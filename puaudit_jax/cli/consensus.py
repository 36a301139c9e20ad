"""``puaudit consensus ...``: scores from pairwise verdicts, and consensus alignment of score matrices.

Sub-commands
- ``scores VERDICTS``: Bradley-Terry (or online Elo) per judge -> ``scores.csv`` (judges x models,
  Elo), ``intervals.csv`` (bootstrap, with ``--n-boot``), ``agreement.csv`` (Pearson / Kendall / MSE
  of every judge against ``--reference`` or the consensus). VERDICTS is a csv / jsonl / parquet file
  with columns judge (name), model_a, model_b, winner (A | B | tie), or a bundled set: ``llmfao``
  (crowd votes, gpt4, gpt3) or ``mtbench`` (human, gpt4).
- ``align MATRIX``: the consensus adapter on a judges x models csv (first column = judge) ->
  ``aligned.csv``, ``metrics.json`` (before / after, the seed recorded), ``heatmaps.png``.
  ``--human NAME`` takes the row NAME of MATRIX as the human reference (left out of the judges).
  MATRIX may be ``uda-transfer`` / ``uda-arenahard`` (the seed's bundled matrices).
- ``table4``: the seed appendix's Table 4 from its bundled matrices (a quick check).

The computing is :mod:`puaudit_jax.consensus.runs`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from ..consensus.alignment import AlignConfig
from ..consensus.bradley_terry import BTConfig
from ..consensus.elo import EloConfig
from ..consensus.runs import (
    align_matrix,
    judge_scores,
    load_matrix,
    load_verdicts,
    split_human,
    table4,
    write_alignment,
    write_judge_scores,
)
from .run_folder import wrote


def add_consensus_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``consensus`` (with sub-commands scores / align / table4) to an argparse sub-parser set."""
    p = subparsers.add_parser("consensus", help="UDA: judge score matrices (BT / Elo) and consensus alignment")
    sub = p.add_subparsers(dest="consensus_command", required=True)

    s = sub.add_parser("scores", help="Bradley-Terry / Elo scores per judge from pairwise verdicts")
    s.add_argument("verdicts", help="file (judge, model_a, model_b, winner) or a bundled set: llmfao | mtbench")
    s.add_argument("--method", choices=("bt", "elo"), default="bt")
    s.add_argument("--ties", choices=("half", "davidson"), default="half")
    s.add_argument("--ridge", type=float, default=0.0, help="Gaussian prior precision (0 = plain MLE)")
    s.add_argument("--anchor", help="model pinned at 1000 (default: mean 1000)")
    s.add_argument("--k", type=float, default=4.0, help="Elo K factor")
    s.add_argument("--orders", type=int, default=100, help="Elo: shuffled orders averaged")
    s.add_argument("--n-boot", type=int, default=0, help="bootstrap resamples for intervals (BT)")
    s.add_argument("--reference", help="judge whose scores the others are compared with (default: consensus)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)

    a = sub.add_parser("align", help="consensus alignment of a judges x models score matrix")
    a.add_argument("matrix", help="csv (first column judge) or uda-transfer | uda-arenahard")
    a.add_argument("--human", help="row of MATRIX holding human scores (evaluation only)")
    a.add_argument("--anchor", choices=("self", "consensus"), default="self")
    a.add_argument("--mode", choices=("shrink", "residual"), default="shrink")
    a.add_argument("--w-anchor", type=float, default=1.0)
    a.add_argument("--w-rank", type=float, default=1.0)
    a.add_argument("--w-consensus", type=float, default=4.0)
    a.add_argument("--steps", type=int, default=600)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--out", required=True)
    a.add_argument("--no-figures", action="store_true")

    sub.add_parser("table4", help="reproduce the seed appendix's Table 4 from its bundled matrices")
    p.set_defaults(func=run_consensus)
    return p


def _scores(args) -> int:
    t0 = time.perf_counter()
    verdicts = load_verdicts(args.verdicts)
    bt = BTConfig(ties=args.ties, ridge=args.ridge, anchor=args.anchor)
    elo = EloConfig(k=args.k, n_orders=args.orders, anchor=args.anchor, seed=args.seed)
    run = judge_scores(verdicts, method=args.method, bt=bt, elo=elo, n_boot=args.n_boot, seed=args.seed,
                       reference=args.reference)  # fmt: skip
    files = write_judge_scores(run, args.out, source=args.verdicts)
    print(run.matrices.scores.T.round(1).to_string())
    print(f"\nagreement with {args.reference or 'the consensus'}:\n{run.agreement.round(4).to_string(index=False)}")
    print("\n" + wrote(args.out, files) + f" ({time.perf_counter() - t0:.0f}s)")
    return 0


def _align(args) -> int:
    matrix = load_matrix(args.matrix)
    human_row = args.human or ("human" if args.matrix == "uda-transfer" else None)
    matrix, human = split_human(matrix, human_row)
    config = AlignConfig(w_anchor=args.w_anchor, w_rank=args.w_rank, w_consensus=args.w_consensus,
                         anchor=args.anchor, mode=args.mode, steps=args.steps, seed=args.seed)  # fmt: skip
    run = align_matrix(matrix, config, human)
    files = write_alignment(run, args.out, source=args.matrix, figures=not args.no_figures)
    print(pd.DataFrame({"before": run.before, "after": run.after}).round(4).to_string())
    print("\n" + wrote(args.out, files))
    return 0


def _table4(_args) -> int:
    table, means = table4()
    print(table.round(4).to_string())
    print(
        f"\nmean Pearson {means[('baseline', 'pearson')]:.4f} -> {means[('UDA', 'pearson')]:.4f} "
        f"(paper 0.7363 -> 0.8778); mean MSE {means[('baseline', 'mse')]:.1f} -> {means[('UDA', 'mse')]:.1f} "
        f"(paper 43152.6 -> 19452.7)"
    )
    return 0


def run_consensus(args) -> int:
    """Dispatch ``puaudit consensus <scores | align | table4>``."""
    return {"scores": _scores, "align": _align, "table4": _table4}[args.consensus_command](args)
