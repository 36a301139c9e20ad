"""``puaudit quantify DATA``: agreement, A share, win rates and the Elo leaderboard with intervals.

    puaudit quantify DATA [--level 0.9] [--cluster-by COLUMN] [--style tokens,...] [--with-audit | --audit DIR]
                          [--plan DIR] [--robustness] [--out DIR]

Estimators side by side (judge only, human only, PPI++ with the judge's verdicts, and with
``--with-audit`` / ``--audit`` PPI++ with an audit's expected human verdicts), the judge's bias on
each share (printed apart: judge - human on the labelled rows), the leaderboard with rank-sets and
at equal style; with ``--plan`` (a ``puaudit plan-labels`` folder) every planned label
weighted by 1 / its sampling probability. Writes the tables of
:func:`puaudit_jax.quantify.write_quantification` and ``forest.png``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..audit.config import AuditConfig
from ..quantify.config import BIAS, QuantifyConfig
from . import inputs
from .options import add_options
from .requests import AUDIT_EVIDENCE, WITH_AUDIT_ONLY, AuditSource, FeatureRequest, QuantifyRequest, quantify_request
from .run_folder import wrote

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
    try:
        return pd.read_csv(path, dtype={"id": str})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
        why = "the file is empty" if isinstance(err, pd.errors.EmptyDataError) else str(err).strip()
        raise ValueError(f"{path}: not a label plan ({why}; write one with `puaudit plan-labels`)") from None


def audit_items_of(source: AuditSource, table, features: FeatureRequest, config: AuditConfig, *, data: str,
                   mesh=None, quiet: bool = False):  # fmt: skip
    """The items of the audit --audit names, or of the default audit --with-audit runs, or None.

    Args:
        source: --with-audit | --audit (:class:`~.requests.AuditSource`).
        table: DATA's comparison table.
        features: the embeddings of the --with-audit audit (:class:`~.requests.FeatureRequest`).
        config: the evidence that audit weighs (--evidence, --other-judges).
        data: DATA, named in errors.
        mesh: spreads the embedding of --with-audit (None: one device).
        quiet: no progress bar.
    """
    from ..audit.predictions import tie_hidden_audit
    from ..audit.write import read_items
    from ..datasets.verdicts import MISSING

    if source.audit is not None:
        try:
            return read_items(source.audit)
        except ValueError as err:
            raise ValueError(f"--audit {err}") from None
    if source.with_audit:
        inputs.check_labelled(table, data)
        emb = inputs.features(features, table.assign(human=MISSING), data, mesh, quiet)
        result = tie_hidden_audit(table, emb, config)
        for warning in result.report.evidence_warnings():  # evidence the audit left out, as `audit` says
            print(f"warning: {warning}")
        return result.items
    return None


def _with_p_wrong(source: AuditSource, items):
    """The audit's items (or None), refused with advice for this command when they hold no P(judge wrong)."""
    import numpy as np

    if items is None or ("p_wrong" in items.columns and np.isfinite(items["p_wrong"].to_numpy(float)).any()):
        return items
    if source.with_audit:
        raise ValueError("--with-audit: the audit gave no P(judge wrong) (too few human labels to calibrate it; "
                         "its rule abstained): label more items, or quantify without --with-audit")  # fmt: skip
    raise ValueError(f"--audit {source.audit}: the audit has no P(judge wrong); run `puaudit audit` with a calibrated "
                     "rule (--rule calibrated) on enough labels, or quantify without --audit")  # fmt: skip


def add_audit_source(p, with_audit: str, audit: str) -> None:
    """``--with-audit`` | ``--audit DIR`` on parser ``p``, each with the help text that says what it adds.

    The options that only the audit --with-audit runs reads (:data:`WITH_AUDIT_ONLY`, added to
    ``p`` before) are recorded with their defaults, for :func:`refuse_unused_audit_options`.

    Args:
        p: the command's parser.
        with_audit: the help text of --with-audit.
        audit: the help text of --audit.
    """
    group = p.add_mutually_exclusive_group()
    group.add_argument("--with-audit", action="store_true", help=with_audit)
    group.add_argument("--audit", help=audit)
    p.set_defaults(with_audit_only={a.dest: _parsed_default(a) for a in p._actions if a.dest in WITH_AUDIT_ONLY})


def _parsed_default(action):
    """An option's default as it reaches the arguments (argparse applies ``type`` to a str default)."""
    default = action.default
    return action.type(default) if isinstance(default, str) and callable(action.type) else default


def refuse_unused_audit_options(source: AuditSource) -> None:
    """Without --with-audit, an option only the audit reads, given a value other than its default, is an error."""
    if source.with_audit:
        return
    given = source.unused
    if given:
        read = " (--audit reads an audit, it runs none)" if source.audit is not None else ""
        raise ValueError(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} with --with-audit{read}")


def cmd_quantify(args) -> int:
    """``puaudit quantify``: the request read from the command line (:func:`~.requests.quantify_request`), then run."""
    return run_quantify(quantify_request(args))


def run_quantify(request: QuantifyRequest) -> int:
    """Options checked, then the estimates in a locked output folder."""
    from ..quantify import quantify, write_quantification

    config, source, data, output = request.quantify, request.source, request.data.name, request.output
    request.evidence.validate()
    refuse_unused_audit_options(source)
    mesh = inputs.mesh_of(request.devices) if source.with_audit else None
    inputs.checked_first(request.features, output)
    with inputs.output_folder(output) as run:
        table = inputs.data_table(request.data, output.quiet, request.evidence.other_judges)
        inputs.check_columns(table, data, {"--cluster-by": config.cluster_by})
        for rater in config.raters:  # alpha's raters, named before any estimate
            inputs.check_columns(table, data, {"--raters": rater})
        items = audit_items_of(source, table, request.features, request.evidence, data=data, mesh=mesh,
                               quiet=output.quiet)  # fmt: skip
        audit_items = _with_p_wrong(source, items)
        plan = None if request.plan is None else read_plan(request.plan)
        settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        result = quantify(table, audit_items=audit_items, plan=plan, **settings)
        files = write_quantification(result, run.path, data=data)
        if not output.no_figures:
            import matplotlib.pyplot as plt

            from ..quantify.plots import forest_plot

            plt.close(forest_plot(result.to_frame(), run.path / "forest.png", title=f"{data}"))
            files.append("forest.png")
        run.finish(files)
    _print_result(result, output.out, files)
    return 0


def _print_result(result, out: str, files: list[str]) -> None:
    """The estimates, the judge's bias, the warnings and where the files are."""
    frame = result.to_frame()
    biased = frame["target"].str.startswith(BIAS)
    print(_table_text(frame.loc[~biased, list(COLUMNS)], run_folder=out))
    if biased.any():
        print("\n" + _bias_text(frame[biased], result.level, run_folder=out))
    for line in [] if result.robustness is None else result.robustness.summary():
        print(line)
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(wrote(out, files))


PRINTED_ROWS = 40  # a leaderboard of many models is read from leaderboard.csv, not the terminal


NOTE_WIDTH = 70  # a printed note's most characters (the whole note is in leaderboard.csv)


def _table_text(frame, run_folder: str) -> str:
    """The estimates as text: every row up to :data:`PRINTED_ROWS`, else the first ones and where the rest are.

    Notes longer than :data:`NOTE_WIDTH` are cut (with "...", and a line says where they are whole) and
    left-aligned, so that one long reason does not pad every line of the table.
    """
    cut = False
    if "note" in frame.columns:
        notes = frame["note"].fillna("")
        cut = bool((notes.map(len) > NOTE_WIDTH).any())
        notes = notes.map(lambda n: n if len(n) <= NOTE_WIDTH else n[: NOTE_WIDTH - 3] + "...")
        width = max(notes.map(len).max(), len("note"))  # once, not per row
        frame = frame.assign(note=notes.map(lambda n: n.ljust(width)))
    shown = frame.head(PRINTED_ROWS).to_string(index=False, float_format="{:.4f}".format)
    shown = "\n".join(line.rstrip() for line in shown.splitlines())
    more = len(frame) - PRINTED_ROWS
    shown = shown if more <= 0 else f"{shown}\n... {more} more rows in {run_folder}/leaderboard.csv"
    return shown + (f"\n(notes cut to {NOTE_WIDTH} characters: {run_folder}/leaderboard.csv has them whole)" * cut)


def _bias_text(frame, level: float, run_folder: str) -> str:
    """The "judge bias: <target>" rows as text: how far off the judge's number is, and which way."""
    import numpy as np

    lower, upper = frame["lower"].to_numpy(float), frame["upper"].to_numpy(float)
    reads = np.where(lower > 0, "judge too high", np.where(upper < 0, "judge too low", "no bias shown"))
    table = frame.assign(target=frame["target"].str.removeprefix(BIAS), reads=np.where(frame["note"] == "", reads, ""))
    shown = _table_text(table[["target", "estimate", "lower", "upper", "n_labelled", "reads", "note"]], run_folder)
    return (f"judge bias: the judge's number minus the humans' (judge - human on the labelled rows, "
            f"{level:.0%} interval)\n{shown}")  # fmt: skip


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
    p.add_argument("--out", default="puaudit-quantify", help="output folder (leaderboard.csv / .json, forest.png)")
    p.set_defaults(func=cmd_quantify)
