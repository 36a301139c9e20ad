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

Wiring (in ``puaudit_jax/cli.py``)::

    from .consensus.cli import add_consensus_parser
    add_consensus_parser(sub)          # inside build_parser(), after the other sub-commands

``run_consensus`` is set as the parser's ``func``, so ``main`` needs no other change.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd


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


def _read_table(path: str) -> pd.DataFrame:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return pd.read_csv(path, keep_default_na=False)
    if suffix in (".jsonl", ".json"):
        return pd.read_json(path, lines=suffix == ".jsonl")
    if suffix == ".parquet":
        return pd.read_parquet(path)
    raise SystemExit(f"error: cannot read {path!r} (use .csv, .jsonl or .parquet)")


def _load_verdicts(name: str) -> pd.DataFrame:
    from ..consensus.matrices import llmfao_verdicts, mtbench_verdicts

    if name == "llmfao":
        return llmfao_verdicts("votes")
    if name == "mtbench":
        return mtbench_verdicts()
    if not Path(name).is_file():
        raise SystemExit(f"error: {name!r} is neither a file nor a bundled set (llmfao, mtbench)")
    return _read_table(name)


def _load_matrix(name: str) -> pd.DataFrame:
    from ..datasets import load_uda_scores, score_matrix

    if name in ("uda-transfer", "uda-arenahard"):
        scores = load_uda_scores()
        dataset = "transfer_table6" if name == "uda-transfer" else "arenahard"
        base = score_matrix(scores, dataset, "baseline")
        if name == "uda-transfer":
            base = pd.concat([base, score_matrix(scores, dataset, "human")])
        return base
    if not Path(name).is_file():
        raise SystemExit(f"error: {name!r} is neither a file nor uda-transfer / uda-arenahard")
    table = pd.read_csv(name, index_col=0)
    table.index = table.index.astype(str)
    return table


def _scores(args) -> int:
    from puaudit_runtime.files import write_csv, write_json

    from ..consensus.bradley_terry import BTConfig
    from ..consensus.elo import EloConfig
    from ..consensus.matrices import score_matrices
    from ..consensus.metrics import consensus, judge_metrics

    t0 = time.perf_counter()
    verdicts = _load_verdicts(args.verdicts)
    bt = BTConfig(ties=args.ties, ridge=args.ridge, anchor=args.anchor)
    elo = EloConfig(k=args.k, n_orders=args.orders, anchor=args.anchor, seed=args.seed)
    try:
        res = score_matrices(verdicts, method=args.method, bt=bt, elo=elo, n_boot=args.n_boot, seed=args.seed)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from err
    out = Path(args.out)
    write_csv(res.scores.reset_index(), out / "scores.csv")
    if res.intervals:
        write_csv(pd.concat([t.assign(judge=j) for j, t in res.intervals.items()]), out / "intervals.csv")
    if args.reference is not None and args.reference not in res.scores.index:
        raise SystemExit(f"error: --reference {args.reference!r} is not a judge ({list(res.scores.index)})")
    reference = res.scores.loc[args.reference] if args.reference else consensus(res.scores)
    agreement = judge_metrics(res.scores, reference).reset_index()
    write_csv(agreement, out / "agreement.csv")
    write_json(
        {
            "command": "consensus scores",
            "verdicts": args.verdicts,
            "method": args.method,
            "config": asdict(res.config),
            "seed": args.seed,
            "n_boot": args.n_boot,
            "reference": args.reference or "consensus",
            "excluded": res.excluded,
            "n_comparisons": verdicts.groupby("judge").size().to_dict(),
        },
        out / "run.json",
    )
    print(res.scores.T.round(1).to_string())
    print(f"\nagreement with {args.reference or 'the consensus'}:\n{agreement.round(4).to_string(index=False)}")
    print(
        f"\nwrote {out}/scores.csv, agreement.csv, run.json{', intervals.csv' if res.intervals else ''} "
        f"({time.perf_counter() - t0:.0f}s)"
    )
    return 0


def _align(args) -> int:
    from puaudit_runtime.files import save_figure, write_csv, write_json

    from ..consensus.alignment import AlignConfig, align
    from ..consensus.metrics import consensus, summary

    matrix = _load_matrix(args.matrix)
    human = None
    if args.human:
        if args.human not in matrix.index:
            raise SystemExit(f"error: --human {args.human!r} is not a row of the matrix ({list(matrix.index)})")
        human = matrix.loc[args.human]
        matrix = matrix.drop(index=args.human)
    elif args.matrix == "uda-transfer":
        human = matrix.loc["human"]
        matrix = matrix.drop(index="human")
    config = AlignConfig(
        w_anchor=args.w_anchor,
        w_rank=args.w_rank,
        w_consensus=args.w_consensus,
        anchor=args.anchor,
        mode=args.mode,
        steps=args.steps,
        seed=args.seed,
    )
    try:
        res = align(matrix, config)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from err
    base = consensus(matrix)
    before, after = summary(matrix, human=human), summary(res.scores, base_consensus=base, human=human)
    out = Path(args.out)
    write_csv(res.scores.reset_index(names="judge"), out / "aligned.csv")
    write_json(
        {
            "command": "consensus align",
            "matrix": args.matrix,
            "config": asdict(config),
            "before": before,
            "after": after,
            "terms": res.terms,
            "final_loss": float(res.loss[-1]),
        },
        out / "metrics.json",
    )
    if not args.no_figures:
        from ..consensus.plots import heatmaps

        save_figure(
            heatmaps({"before": matrix, "after": res.scores}), out / "heatmaps.png", dpi=110, bbox_inches="tight"
        )
    print(pd.DataFrame({"before": before, "after": after}).round(4).to_string())
    print(f"\nwrote {out}/aligned.csv, metrics.json{'' if args.no_figures else ', heatmaps.png'}")
    return 0


def _table4(_args) -> int:
    from ..consensus.metrics import consensus, judge_metrics
    from ..datasets import load_uda_scores, score_matrix

    scores = load_uda_scores()
    base = score_matrix(scores, "transfer_table6", "baseline")
    uda = score_matrix(scores, "transfer_table6", "uda")
    c = consensus(base)
    table = pd.concat(
        {"baseline": judge_metrics(base, c)[["pearson", "mse"]], "UDA": judge_metrics(uda, c)[["pearson", "mse"]]},
        axis=1,
    )
    print(table.round(4).to_string())
    means = table.mean()
    print(
        f"\nmean Pearson {means[('baseline', 'pearson')]:.4f} -> {means[('UDA', 'pearson')]:.4f} "
        f"(paper 0.7363 -> 0.8778); mean MSE {means[('baseline', 'mse')]:.1f} -> {means[('UDA', 'mse')]:.1f} "
        f"(paper 43152.6 -> 19452.7)"
    )
    return 0


def run_consensus(args) -> int:
    """Dispatch ``puaudit consensus <scores | align | table4>``."""
    return {"scores": _scores, "align": _align, "table4": _table4}[args.consensus_command](args)


def main(argv=None) -> int:
    """Stand-alone entry (``python -m puaudit_jax.consensus.cli consensus ...``) until wired into puaudit."""
    parser = argparse.ArgumentParser(prog="puaudit")
    add_consensus_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
