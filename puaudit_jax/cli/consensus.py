"""``puaudit consensus ...``: scores from pairwise verdicts, and consensus alignment of score matrices.

Sub-commands
- ``scores VERDICTS``: Bradley-Terry (or online Elo) per judge -> ``scores.csv`` (judges x models,
  Elo), ``intervals.csv`` (bootstrap, with ``--n-boot``), ``agreement.csv`` (Pearson / Kendall / MSE
  of every judge against ``--reference`` or the consensus). VERDICTS is a csv / jsonl / parquet file
  with columns judge (name), model_a, model_b, winner (A | B | tie), or a bundled set: ``llmfao``
  (crowd votes, gpt4, gpt3) or ``mtbench`` (human, gpt4).
- ``align MATRIX``: the consensus adapter on a judges x models csv (first column = judge) ->
  ``aligned.csv``, ``metrics.json`` (before / after, the paper recorded), ``heatmaps.png``.
  ``--human NAME`` takes the row NAME of MATRIX as the human reference (left out of the judges).
  MATRIX may be ``uda-transfer`` / ``uda-arenahard`` (the paper's bundled matrices).
- ``table4``: the paper's appendix's Table 4 from its bundled matrices (a quick check).

The computing is :mod:`puaudit_jax.consensus.runs`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import time

from ..consensus.config import AlignConfig, BTConfig, EloConfig, ScoresConfig, refuse_other_method
from .options import add_options
from .requests import ALIGN_FIELDS, BT_FIELDS, ELO_FIELDS, ELO_RENAME, ConsensusRequest, consensus_request
from .run_folder import RunFolder, wrote

SEED_HELP = {"seed": {"help": "seed of the bootstrap resamples and of Elo's shuffled orders"}}


def add_consensus_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``consensus`` (with sub-commands scores / align / table4) to an argparse sub-parser set.

    The settings' options and defaults come from :class:`~puaudit_jax.consensus.runs.ScoresConfig`,
    :class:`BTConfig`, :class:`EloConfig` and :class:`AlignConfig` through :mod:`.options`.
    """
    p = subparsers.add_parser("consensus", help="UDA: judge score matrices (BT / Elo) and consensus alignment")
    sub = p.add_subparsers(dest="consensus_command", required=True)

    s = sub.add_parser("scores", help="Bradley-Terry / Elo scores per judge from pairwise verdicts")
    s.add_argument(
        "verdicts",
        help="file of long verdicts (judge, model_a, model_b, winner), a comparison file of any "
        "format DATA takes (every judge in it), or a bundled set: llmfao | mtbench",
    )
    add_options(s, ScoresConfig, include=("method",))
    add_options(s, BTConfig, include=BT_FIELDS)
    add_options(s, EloConfig, include=ELO_FIELDS, rename=ELO_RENAME)
    add_options(s, ScoresConfig, include=("n_boot", "reference", "seed"), overrides=SEED_HELP)
    s.add_argument("--out", required=True, help="output folder (score matrices, intervals, run.json)")

    a = sub.add_parser("align", help="consensus alignment of a judges x models score matrix")
    a.add_argument("matrix", help="csv (first column judge) or uda-transfer | uda-arenahard")
    a.add_argument("--human", help="row of MATRIX holding human scores (evaluation only)")
    add_options(a, AlignConfig, include=ALIGN_FIELDS)
    a.add_argument("--out", required=True, help="output folder (aligned matrices, metrics, figures)")
    a.add_argument("--no-figures", action="store_true", help="write no figures")

    sub.add_parser("table4", help="reproduce the paper's appendix's Table 4 from its bundled matrices")
    p.set_defaults(func=cmd_consensus)
    return p


def _scores(request: ConsensusRequest) -> int:
    from ..consensus.runs import judge_scores, load_verdicts, write_judge_scores

    t0 = time.perf_counter()
    config, output = request.scores, request.output
    refuse_other_method(config, request.bt, request.elo)
    with RunFolder(output.out, list(output.argv)) as folder:
        run = judge_scores(load_verdicts(request.source), config, bt=request.bt, elo=request.elo)
        files = write_judge_scores(run, folder.path, source=request.source)
        folder.finish(files)
    print(run.matrices.scores.T.round(1).to_string())
    print(f"\nagreement with {config.reference or 'the consensus'}:\n{run.agreement.round(4).to_string(index=False)}")
    print("\n" + wrote(output.out, files) + f" ({time.perf_counter() - t0:.0f}s)")
    return 0


def _align(request: ConsensusRequest) -> int:
    import pandas as pd

    from ..consensus.runs import align_matrix, load_matrix, split_human, write_alignment

    output = request.output
    with RunFolder(output.out, list(output.argv)) as folder:
        matrix = load_matrix(request.source)
        human_row = request.human or ("human" if request.source == "uda-transfer" else None)
        matrix, human = split_human(matrix, human_row)
        run = align_matrix(matrix, request.align, human)
        files = write_alignment(run, folder.path, source=request.source, figures=not output.no_figures)
        folder.finish(files)
    print(pd.DataFrame({"before": run.before, "after": run.after}).round(4).to_string())
    print("\n" + wrote(output.out, files))
    return 0


def _table4(_request: ConsensusRequest) -> int:
    from ..consensus.runs import table4

    table, means = table4()
    print(table.round(4).to_string())
    print(
        f"\nmean Pearson {means[('baseline', 'pearson')]:.4f} -> {means[('UDA', 'pearson')]:.4f} "
        f"(paper 0.7363 -> 0.8778); mean MSE {means[('baseline', 'mse')]:.1f} -> {means[('UDA', 'mse')]:.1f} "
        f"(paper 43152.6 -> 19452.7)"
    )
    return 0


def cmd_consensus(args) -> int:
    """``puaudit consensus <scores | align | table4>``: the request (:func:`~.requests.consensus_request`), then run."""
    return run_consensus(consensus_request(args))


def run_consensus(request: ConsensusRequest) -> int:
    """Dispatch ``puaudit consensus <scores | align | table4>``."""
    return {"scores": _scores, "align": _align, "table4": _table4}[request.command](request)
