"""``puaudit quantify DATA``: agreement, A share, win rates and the Elo leaderboard with intervals.

    puaudit quantify DATA [--level 0.9] [--cluster-by COLUMN] [--style tokens,...] [--with-audit | --audit DIR]
                          [--plan DIR] [--out DIR]

Estimators side by side (judge only, human only, PPI++ with the judge's verdicts, and with
``--with-audit`` / ``--audit`` PPI++ with an audit's expected human verdicts), the leaderboard with
rank-sets and at equal style; with ``--plan`` (a ``puaudit plan-labels`` folder) every planned label
weighted by 1 / its sampling probability. Writes the tables of
:func:`puaudit_jax.quantify.write_quantification` and ``forest.png``.
"""

from __future__ import annotations

from pathlib import Path

from ..audit import AuditConfig
from ..audit.predictions import audit_for_quantify
from ..audit.write import read_items
from ..datasets.verdicts import MISSING
from ..quantify import quantify, write_quantification
from ..quantify.estimators import check_level
from ..quantify.pipeline import QuantifyConfig
from . import inputs
from .options import add_options, options_from_args

AUDIT_EVIDENCE = ("evidence", "other_judges")  # what --with-audit weighs, as for `puaudit audit`
COLUMNS = (
    "target",
    "estimator",
    "estimate",
    "lower",
    "upper",
    "rank_lower",
    "rank_upper",
    "n_labelled",
    "n_unlabelled",
    "note",
)


def read_plan(path: str):
    """The plan frame of a ``plan-labels`` folder (its plan.csv) or of the file itself."""
    import pandas as pd

    path = Path(path)
    path = path / "plan.csv" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{path}: no label plan there (write one with `puaudit plan-labels`)")
    return pd.read_csv(path, dtype={"id": str})


def audit_items_of(args, table, config: AuditConfig):
    """The items of the audit --audit names, or of the default audit --with-audit runs, or None."""
    if args.audit is not None:
        return read_items(args.audit)
    if args.with_audit:
        return audit_for_quantify(table, inputs.features(args, table.assign(human=MISSING)), config)
    return None


def add_audit_source(p, with_audit: str, audit: str) -> None:
    """``--with-audit`` | ``--audit DIR`` on parser ``p``, each with the help text that says what it adds."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--with-audit", action="store_true", help=with_audit)
    group.add_argument("--audit", help=audit)


def cmd_quantify(args) -> int:
    """``puaudit quantify``: options checked, then the estimates in a locked output folder."""
    options = options_from_args(args, QuantifyConfig)
    check_level(options["level"])
    config = AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_EVIDENCE))
    config.validate()
    args.mesh_obj = inputs.mesh_of(args) if args.with_audit else None
    inputs.checked_first(args)
    with inputs.output_folder(args) as run:
        table = inputs.load_data(args.data, args.include_unlabelled, other_judges=config.other_judges)
        audit_items = audit_items_of(args, table, config)
        plan = None if args.plan is None else read_plan(args.plan)
        result = quantify(table, audit_items=audit_items, plan=plan, **options)
        files = write_quantification(result, args.out, data=args.data)
        if not args.no_figures:
            import matplotlib.pyplot as plt

            from ..quantify.plots import forest_plot

            plt.close(forest_plot(result.to_frame(), Path(args.out) / "forest.png", title=f"{args.data}"))
            files.append("forest.png")
        run.finish(files)
    print(result.to_frame()[list(COLUMNS)].to_string(index=False, float_format="{:.4f}".format))
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(f"wrote {args.out}/" + ", ".join(files))
    return 0


def add_quantify_parser(sub) -> None:
    """Register ``quantify`` on a subparsers object."""
    p = sub.add_parser("quantify", help="agreement, A share, win rates and the Elo leaderboard with intervals (PPI++)")
    inputs.add_data_options(p)
    add_options(p, QuantifyConfig)
    add_options(p, AuditConfig, include=AUDIT_EVIDENCE)
    add_audit_source(p, "also run the default calibrated audit (tie labels hidden; embeddings as for `puaudit "
                     "audit`) and add PPI++ with its expected human verdicts", "an audit's output folder (or its "
                     "items.csv) of the same data, run with a calibrated rule and the tie labels hidden: adds PPI++ "
                     "with its predictions")  # fmt: skip
    p.add_argument("--plan", help="the label plan (a `puaudit plan-labels` folder or its plan.csv) the newer "
                   "labels were drawn by: weights them by 1 / their sampling probability")  # fmt: skip
    p.add_argument("--out", default="puaudit-quantify")
    p.set_defaults(func=cmd_quantify)
