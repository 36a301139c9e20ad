"""``puaudit plan-labels DATA --budget K``: which unlabelled items to send to humans next.

    puaudit plan-labels DATA --budget K [--with-audit | --audit DIR] [--target agreement] [--width X] [--out DIR]

Draws about K items of the unlabelled pool, more where the audit's P(judge wrong) is uncertain
(:mod:`puaudit_jax.quantify.active`; random sampling without an audit), and writes ``plan.csv``
(every usable row with its sampling probability), ``to_label.csv`` (the drawn rows), ``power.csv``
and ``power.png`` (predicted interval half-widths against the budget, planned and random) and
``plan.json``. Fill the ``human`` column of ``to_label.csv`` (A, B or tie) and ``puaudit quantify DATA
--labels DIR/to_label.csv --plan DIR`` joins the labels on ids and weights them by their
probabilities so the intervals stay valid (labels written into DATA itself work the same).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ..audit.config import AuditConfig
from ..quantify.config import PlanConfig
from . import inputs
from .options import add_options
from .quantify import add_audit_source, audit_items_of, refuse_unused_audit_options
from .requests import AUDIT_EVIDENCE, PlanRequest, plan_request
from .run_folder import wrote


def _p_wrong(request: PlanRequest, table, mesh):
    """The audit's P(judge wrong) per row (--with-audit / --audit), or None for random sampling.

    An audit that gave no P(judge wrong) (too few labels to calibrate) means random sampling, said.
    """
    import numpy as np

    from ..quantify.targets import audit_p_wrong

    items = audit_items_of(request.source, table, request.features, request.evidence, data=request.data.name,
                           mesh=mesh, quiet=request.output.quiet)  # fmt: skip
    if items is None:
        return None
    if "p_wrong" not in items.columns or not np.isfinite(items["p_wrong"].to_numpy(float)).any():
        print("note: the audit gave no P(judge wrong) (too few labels to calibrate it): sampling at random")
        return None
    return audit_p_wrong(table, items)


def _write(report, table, folder: Path, data: str, config: PlanConfig) -> list[str]:
    from puaudit_runtime.files import write_csv, write_json

    chosen = table[table["id"].astype(str).isin(report.selected["id"])]
    write_csv(report.frame, folder / "plan.csv")
    write_csv(chosen.assign(human=None), folder / "to_label.csv")  # the human column to fill: a --labels file
    write_csv(report.power, folder / "power.csv")
    write_json({"data": data, "settings": asdict(config), "pool": int((report.frame["role"] == "pool").sum()),
                "labelled_before": int((report.frame["role"] == "labelled").sum()), "selected": len(chosen),
                "rows_without_a_judge_verdict": len(table) - len(report.frame),
                "informative": report.informative, "labels_needed_for_width": report.needed,
                "half_width_now": report.current, "note": report.note,
                "power": report.power.to_dict(orient="records")}, folder / "plan.json")  # fmt: skip
    return ["plan.csv", "to_label.csv", "power.csv", "plan.json"]


def cmd_plan_labels(args) -> int:
    """``puaudit plan-labels``: the request read from the command line (:func:`~.requests.plan_request`), then run."""
    return run_plan_labels(plan_request(args))


def run_plan_labels(request: PlanRequest) -> int:
    """Settings checked, the audit if asked, the draw, the files."""
    from ..quantify.plan import plan_labels

    config, data, output = request.plan, request.data.name, request.output
    config.validate()
    request.evidence.validate()
    refuse_unused_audit_options(request.source)
    mesh = inputs.mesh_of(request.devices) if request.source.with_audit else None
    inputs.checked_first(request.features, output)
    with inputs.output_folder(output) as run:
        table = inputs.data_table(request.data, output.quiet, request.evidence.other_judges, include_unlabelled=True)
        report = plan_labels(table, _p_wrong(request, table, mesh), config)
        files = _write(report, table, run.path, data, config)
        if not output.no_figures:
            import matplotlib.pyplot as plt

            from ..quantify.plots import power_plot

            plt.close(power_plot(report, run.path / "power.png", title=data))
            files.append("power.png")
        run.finish(files)
    _print(report, config)
    if len(table) > len(report.frame):
        print(f"{len(table) - len(report.frame)} rows have no judge verdict (A/B/tie): not in the plan")
    print(wrote(output.out, files))
    return 0


def _print(report, config: PlanConfig) -> None:
    import numpy as np

    chosen, pool = report.selected, report.frame[report.frame["role"] == "pool"]
    how = "more where P(judge wrong) is uncertain" if report.informative else "uniformly (no audit: random sampling)"
    print(f"{len(chosen)} of {len(pool)} unlabelled items drawn {how}; sampling probabilities "
          f"{pool['sampling_prob'].min():.3g} to {pool['sampling_prob'].max():.3g}")  # fmt: skip
    at = report.power.set_index("budget").loc[config.budget]
    print(f"predicted {config.target} interval half-width at budget {config.budget}: {at['planned']:.4f} "
          f"(random sampling: {at['random']:.4f}; level {config.level})")  # fmt: skip
    print(f"with the labels at hand: {report.current:.4f}")
    if report.note:
        print(f"note: {report.note}")
    if report.needed is not None:
        pool_size = len(pool)
        enough = (f"about {report.needed} more labels" if 0 < report.needed <= pool_size else
                  "the labels at hand suffice" if report.needed == 0 else
                  f"more labels than the pool has ({pool_size})")  # fmt: skip
        print(f"for a half-width of {config.width}: {enough}")
    if np.isfinite(pool["p_wrong"]).any() and not report.informative:
        print("note: P(judge wrong) is the same everywhere: the plan is random sampling")


def add_plan_parser(sub) -> None:
    """Register ``plan-labels`` on a subparsers object."""
    p = sub.add_parser("plan-labels", help="which unlabelled items to send to humans next (active sampling, "
                       "valid intervals afterwards with quantify --plan)")  # fmt: skip
    inputs.add_data_options(p)
    add_options(p, PlanConfig)
    add_options(p, AuditConfig, include=AUDIT_EVIDENCE)
    add_audit_source(p, "run the default calibrated audit (tie labels hidden) and sample where its P(judge "
                     "wrong) is uncertain", "an audit's output folder (or its items.csv) of the same data, run "
                     "with a calibrated rule and the tie labels hidden")  # fmt: skip
    p.add_argument("--out", default="puaudit-plan", help="output folder (plan.csv, to_label.csv, figures)")
    p.set_defaults(func=cmd_plan_labels)
