"""``puaudit audit DATA``: audit the unlabelled judge verdicts of a comparison table.

    puaudit audit DATA [--embeddings FILE | --encoder minilm|smollm2|PATH] [--scorer knn] [--rule evidence]
                  [--flip-threshold 0.5] [--confidence 0.9] [--cluster-by COLUMN] [--m M] [--out DIR]

Writes ``DIR/items.csv`` and ``DIR/items.parquet`` (one row per input comparison), ``DIR/report.json``
(:class:`~puaudit_jax.audit.AuditReport`), ``DIR/figure2.png`` and, for calibrated rules,
``DIR/calibration.png``; with ``--guarantee A`` also ``DIR/guarantee.png``, ``DIR/plan.csv`` (the
escalated rows as a label plan, read back by ``puaudit quantify DATA --plan DIR``) and
``DIR/to_label.csv``. ``--hide-labels F`` hides the human verdicts of a share F of each type's
labelled rows (audited as unlabelled and scored against their hidden labels in the report).

The audit's options and defaults come from :class:`~puaudit_jax.audit.AuditConfig` and the
calibrated rule's fields through :mod:`puaudit_jax.cli.options`; the scorer and rule helpers here
are shared with ``evaluate`` and ``demo``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from puaudit_runtime.checks import check_fraction

from ..audit.config import AuditConfig
from ..audit.names import RULE_NAMES, SCORER_NAMES, current_rule
from ..audit.rules import CalibratedRule
from ..datasets.names import BUNDLED
from . import inputs
from .options import add_options
from .requests import AUDIT_FIELDS, RULE_FIELDS, RULE_RENAME, AuditRequest, ScoringRequest, audit_request
from .run_folder import wrote

# ot.settings.DTYPES and SolveOptions.dtype (its first), written here so that --help imports no solver
# (tests/cli/test_options.py checks that they agree)
SOLVER_DTYPES = ("float32", "float64")


def scorer_of(name: str, mesh, dtype: str):
    """A scorer name, or for the entropic partial-OT scorer an instance with the mesh and the float type.

    Args:
        name: the scorer's name (--scorer).
        mesh: the devices of its Sinkhorn solve (--devices / --mesh, :func:`~.inputs.mesh_of`), or None.
        dtype: the float type of its Sinkhorn solve (--solver-dtype).

    Returns:
        ``name`` itself, unless it is "pot" with a mesh or a dtype other than the default: then the
        configured scorer.
    """
    from ..ot.solve import SolveOptions

    if name != "pot" or (mesh is None and dtype == SolveOptions.dtype):
        return name
    from ..audit.scorers import get_scorer

    return get_scorer(name, mesh=mesh, options=SolveOptions(dtype=dtype))


def rule_of(name: str, scoring: ScoringRequest):
    """A rule by name; calibrated rules take --flip-threshold and --confidence (``scoring.rule_options``)."""
    from ..audit.rules import get_rule, needs_crossfit

    if needs_crossfit(name):
        return get_rule(name, **dict(scoring.rule_options))
    return name


def audit_config(config: AuditConfig, scoring: ScoringRequest, mesh) -> AuditConfig:
    """``config`` with its scorer and rule made (:func:`scorer_of`, :func:`rule_of`), validated.

    Args:
        config: the audit's settings, its scorer and rule by name.
        scoring: the scorer's float type and the calibrated rule's settings.
        mesh: the devices of the pot scorer's solve (:func:`~.inputs.mesh_of`), or None.
    """
    scorer = scorer_of(config.scorer, mesh, scoring.solver_dtype)
    config = replace(config, scorer=scorer, rule=rule_of(config.rule, scoring))
    config.validate()
    return config


def add_audit_options(p: argparse.ArgumentParser) -> None:
    """The audit's settings, generated from AuditConfig and the calibrated rule's fields."""
    add_options(p, AuditConfig, include=AUDIT_FIELDS)
    add_options(p, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME)
    p.add_argument(
        "--solver-dtype",
        choices=list(SOLVER_DTYPES),
        default=SOLVER_DTYPES[0],
        help="float type of the pot scorer's Sinkhorn solve (float64: results that do not depend on "
        "the order of float additions, e.g. the same items on any number of devices; ~2x slower)",
    )


def cmd_audit(args) -> int:
    """``puaudit audit``: the request read from the command line (:func:`~.requests.audit_request`), then run."""
    return run_audit_command(audit_request(args))


def run_audit_command(request: AuditRequest) -> int:
    """Options checked, then the audit in a locked output folder."""
    check_fraction("--hide-labels", request.hide_labels, optional=True)
    mesh = inputs.mesh_of(request.devices)
    config = audit_config(request.audit, request.scoring, mesh)
    config.check_evidence_is_read()
    inputs.checked_first(request.features, request.output)
    with inputs.output_folder(request.output) as run:
        return _audit_command(request, config, run, mesh)


def _u_hint(data: str) -> str:
    """What to do when no unlabelled row is left: hide labels, or (a bundled set) add its judge-only rows."""
    bundled = " or --include-unlabelled" if data in BUNDLED else ""
    return f" (use --hide-labels F to audit a share of the labelled items{bundled})"


def _audit_command(request: AuditRequest, config: AuditConfig, run, mesh) -> int:
    from ..audit import run_audit
    from ..datasets.verdicts import MISSING
    from ..evaluate import split_labels
    from ..evaluate.consistency import with_hidden_labels

    data, hide, output = request.data.name, request.hide_labels, request.output
    table = inputs.data_table(request.data, output.quiet, config.other_judges)
    inputs.check_columns(table, data, {"--cluster-by": config.cluster_by})
    inputs.check_labelled(table, data)
    if not (request.features.embeddings or hide or (table["human"] == MISSING).any()):  # before embedding it
        raise ValueError(f"{data}: every row is labelled, so no judge verdict is left to audit{_u_hint(data)}")
    embedded = inputs.to_embed(table, config, every=bool(request.features.save_embeddings))  # serves quantify too
    judges = config.other_judges if config.cascade else ()
    emb = inputs.features(request.features, embedded, data, mesh, output.quiet, judges)
    truth = None
    if hide:
        split = split_labels(table, p_ratio=1 - hide, seed=config.seed)
        table, truth = split.table, split.truth
    try:
        result = run_audit(table, emb, config)
    except ValueError as err:
        if "U is empty" not in str(err):
            raise
        raise ValueError(f"{err}{_u_hint(data)}") from None
    if truth is not None:
        result = with_hidden_labels(result, truth, hide)
    return 0 if run is None else _report(result, table, truth, run, request)


def _report(result, table, truth, run, request: AuditRequest) -> int:
    """The audit's files in the run folder, its summary and where the files are (the process that writes)."""
    from ..audit import write_result

    out = request.output.out
    files, to_label = write_result(result, run.path), None
    if result.report.guarantee is not None:
        to_label = _write_escalation(result, table, run.path)
        files += ["plan.csv", "to_label.csv"]
    if not request.output.no_figures:
        from ..audit.plots import audit_figures

        files += audit_figures(result, truth, run.path, title=request.data.name)
    run.finish(files)
    print(result.report.summary())
    if truth is not None:
        print(result.report.hidden_labels.table())
    print(wrote(out, files))
    if to_label is not None:
        print(_escalation_note(to_label, table, out))
    return 0


def _escalation_note(why: dict, table, out: str) -> str:
    """What to label next (``why``: reason -> rows drawn), and the quantify command that reads the labels back.

    ``--with-audit`` where DATA has human ties: a plain audit leaves tie-labelled rows out, so its items
    cannot serve quantify.
    """
    from ..datasets.verdicts import TIE

    parts = ", ".join(f"{n} {reason}" for reason, n in why.items() if n)
    audit = "--with-audit" if (table["human"].astype(str) == TIE).any() else f"--audit {out}"
    return (
        f"{sum(why.values())} rows to label ({parts or 'none'}): {out}/to_label.csv; with their human "
        f"verdicts in DATA, `puaudit quantify DATA --plan {out} {audit}` gives intervals valid under the plan"
    )


def _write_escalation(result, table, folder) -> dict:
    """Write the label plan (``plan.csv``) and the rows to label (``to_label.csv``); return why each was drawn.

    The plan draws the escalated rows and those the audit left out with probability 1, and a random share
    ``spot_checks`` of the certified rows (:func:`~puaudit_jax.quantify.plan.escalation_plan`); ``to_label.csv``
    holds the drawn rows with their probability, why they were drawn and an empty ``human`` column to fill in
    (the filled sheet is a ``--labels`` file).
    """
    from puaudit_runtime.files import write_csv

    from ..quantify.plan import escalation_plan

    plan = escalation_plan(result.items, result.config.spot_checks, result.config.seed)
    drawn = plan.loc[plan["selected"], ["id", "sampling_prob", "why"]]
    chosen = table.assign(id=table["id"].astype(str), human=None).merge(drawn, on="id", how="inner")
    write_csv(plan, folder / "plan.csv")
    write_csv(chosen, folder / "to_label.csv")
    reasons = ("escalated", "spot check", "left out of the audit")
    return {reason: int((drawn["why"] == reason).sum()) for reason in reasons}


def add_audit_parser(sub) -> None:
    """Register ``audit`` on a subparsers object."""
    p = sub.add_parser("audit", help="audit the unlabelled judge verdicts of DATA")
    inputs.add_data_options(p)
    add_audit_options(p)
    p.add_argument(
        "--scorer",
        default=AuditConfig.scorer,
        choices=sorted(SCORER_NAMES),
        help=f"default {AuditConfig.scorer} (picked by the data; the paper's is pot)",
    )
    p.add_argument(
        "--rule",
        default=AuditConfig.rule,
        type=current_rule,  # a renamed rule's old name, with a warning
        choices=sorted(RULE_NAMES),
        help=f"default {AuditConfig.rule} (calibrated, abstaining; the paper's is paper)",
    )
    p.add_argument("--hide-labels", type=float, help="hide the human labels of this share of labelled rows")
    p.add_argument(
        "--out",
        default="puaudit-out",
        help="output folder (items.csv, report.json, figures; see the output-files page)",
    )
    p.set_defaults(func=cmd_audit)
