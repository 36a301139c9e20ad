"""``puaudit evaluate DATA`` (the paper's protocol) and ``puaudit demo`` (it, end to end, on MT-Bench).

    puaudit evaluate DATA [--embeddings FILE | --encoder ...] [--pairs knn:evidence,pot:paper]
                     [--scorers knn,pot-exact|all --rules evidence,paper|all] [--seeds 10] [--p-ratio 0.2]
                     [--split-by COLUMN] [--ceiling] [--sweep p_ratio=0.05,0.2] --out DIR
    puaudit demo [--out DIR]

evaluate writes ``DIR/results.csv`` (one row per scorer, rule and question type), ``DIR/results.json``
(the same plus the settings), ``DIR/per_seed.csv``, ``DIR/figure3.png``, ``DIR/figure2.png`` and,
when the first scorer's rule is calibrated, ``DIR/calibration.png``. With ``--guarantee A`` each
scorer's first calibrated rule is certified and the other pairs are compared uncertified (a line says
which). demo writes the same for
MT-Bench GPT-4 against the expert votes and prints the default audit beside the paper's Table 5,
then what the default audit certifies with a guarantee (``--guarantee``; 0.8 in the demo unless given:
``DEMO_GUARANTEE``), recorded under ``meta.guarantee`` of ``results.json``.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace

from ..audit.config import DEFAULT_RULE, DEFAULT_SCORER, PAPER_RULE, AuditConfig
from ..audit.names import RULE_NAMES, SCORER_NAMES, current_rule
from ..evaluate.config import DEFAULT_PAIRS, DEMO_SCORERS, Protocol
from . import inputs
from .audit import add_audit_options, rule_of, scorer_of
from .options import add_options
from .requests import (
    CompareRequest,
    DemoRequest,
    EvaluateRequest,
    OutputRequest,
    ScoringRequest,
    demo_request,
    evaluate_request,
)
from .run_folder import wrote

DEFAULT_RULES = f"{DEFAULT_RULE},{PAPER_RULE}"  # --rules without a value: the default audit's rule, the paper's


def _names(value: str, registry, what: str) -> list[str]:
    names = list(registry) if value == "all" else [current_rule(v.strip()) for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in registry]
    if bad:
        raise SystemExit(f"error: unknown {what} {bad}; use {sorted(registry)} or 'all'")
    return names


def _pairs(value: str) -> list[tuple[str, str]]:
    """``scorer:rule,scorer:rule`` -> [(scorer, rule)], names checked."""
    pairs = [tuple(p.strip().split(":", 1)) for p in value.split(",") if p.strip()]
    pairs = [(p[0], current_rule(p[1])) if len(p) == 2 else p for p in pairs]
    bad = [":".join(p) for p in pairs if len(p) != 2 or p[0] not in SCORER_NAMES or p[1] not in RULE_NAMES]
    if bad or not pairs:
        raise SystemExit(
            f"error: --pairs needs scorer:rule items with scorers {sorted(SCORER_NAMES)} and rules "
            f"{sorted(RULE_NAMES)}; got {bad or value!r}"
        )
    return pairs


def _sweep(value: str | None) -> tuple[str, list[float]] | None:
    """--sweep p_ratio=V1,V2 | m=V1,V2 -> (param, values), checked before any work."""
    if not value:
        return None
    param, _, text = value.partition("=")
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if param not in ("p_ratio", "m") or not values:
        raise ValueError(f"--sweep needs p_ratio=V1,V2,... or m=V1,V2,..., got {value!r}")
    return param, values


def _checked_settings(config: AuditConfig, protocol: Protocol, swept) -> AuditConfig:
    """``config`` and ``protocol`` validated with each --sweep value; ``config`` returned.

    A swept m replaces the config's per run (so --holdout 0 may go with --sweep m=...).
    """
    param, values = swept or (None, [None])
    for value in values:
        (replace(protocol, p_ratio=value) if param == "p_ratio" else protocol).validate()
        (replace(config, m=value) if param == "m" else config).validate()
    return config


def _compared(compare: CompareRequest, scoring: ScoringRequest, mesh) -> dict:
    """{"pairs": [...]} or the grid {"scorers": [...], "rules": [...]} the options ask for."""
    scorer = functools.partial(scorer_of, mesh=mesh, dtype=scoring.solver_dtype)
    if compare.scorers or compare.rules:
        return {
            "scorers": [scorer(s) for s in _names(compare.scorers or DEFAULT_SCORER, SCORER_NAMES, "scorers")],
            "rules": [rule_of(r, scoring) for r in _names(compare.rules or DEFAULT_RULES, RULE_NAMES, "rules")],
        }
    return {"pairs": [(scorer(s), rule_of(r, scoring)) for s, r in _pairs(compare.pairs)]}


def _check_guarantee_scope(compared: dict, guarantee: float | None) -> None:
    """Before any data is read: a --guarantee needs a calibrated rule among those compared."""
    if guarantee is None:
        return
    from ..evaluate.protocol import guarantee_scope, pairs_by_scorer

    guarantee_scope(pairs_by_scorer(**compared), guarantee)


def _write(res, output: OutputRequest, data: str, run) -> list[str]:
    """The evaluation's files and figures in --out, recorded in the run folder's manifest."""
    from ..evaluate import write_evaluation

    files = write_evaluation(res, run.path, data=data)
    if not output.no_figures:
        from ..evaluate.plots import evaluation_figures

        files += evaluation_figures(res, run.path, data=data)
    run.finish(files)
    return files


def cmd_evaluate(args) -> int:
    """``puaudit evaluate``: the request read from the command line (:func:`~.requests.evaluate_request`), then run."""
    return run_evaluate(evaluate_request(args))


def run_evaluate(request: EvaluateRequest) -> int:
    """Options checked, then the protocol in a locked output folder."""
    mesh = inputs.mesh_of(request.devices)
    swept = _sweep(request.compare.sweep)
    config = _checked_settings(request.audit, request.protocol, swept)
    compared = _compared(request.compare, request.scoring, mesh)
    _check_guarantee_scope(compared, config.guarantee)
    inputs.checked_first(request.features, request.output)
    with inputs.output_folder(request.output) as run:
        return _evaluate_command(request, config, compared, swept, run, mesh)


def _evaluate_command(request: EvaluateRequest, config: AuditConfig, compared: dict, swept, run, mesh) -> int:
    from ..evaluate import evaluate, summary_table, sweep

    data, output, protocol = request.data.name, request.output, request.protocol
    table = inputs.data_table(request.data, output.quiet, config.other_judges)
    columns = {"--split-by": protocol.split_by, "--cluster-by": config.cluster_by}
    inputs.check_columns(table, data, columns, complete=("--split-by",))
    inputs.check_labelled(table, data)
    emb = inputs.features(request.features, inputs.to_embed(table, config), data, mesh, output.quiet)
    settings = dict(protocol=protocol, config=config, progress=not output.quiet, **compared)
    if swept:
        res = sweep(table, emb, param=swept[0], values=swept[1], **settings)
    else:
        res = evaluate(table, emb, **settings)
    if run is None:
        return 0
    files = _write(res, output, data, run)
    overall = res.summary[res.summary.question_type == "all"]
    print(summary_table(res.summary) if not swept else overall.to_string(index=False, float_format="{:.4f}".format))
    if res.meta.get("guarantee", {}).get("not_applicable"):
        print(_not_certified(res.meta["guarantee"]))
    print(wrote(output.out, files))
    return 0


def _not_certified(scope: dict) -> str:
    """The line saying which pairs the guarantee certified and which it does not apply to."""
    return (
        f"--guarantee {scope['A']:g} certifies {', '.join(scope['applies_to'])}; not applicable to "
        f"{', '.join(scope['not_applicable'])} (no P(judge wrong): compared uncertified, coverage n/a)"
    )


def cmd_demo(args) -> int:
    """``puaudit demo``: the request read from the command line (:func:`~.requests.demo_request`), then run."""
    return run_demo_command(demo_request(args))


def run_demo_command(request: DemoRequest) -> int:
    """MT-Bench GPT-4 vs the experts, the default audit beside the paper's, then with a guarantee."""
    t0 = time.perf_counter()
    mesh = inputs.mesh_of(request.devices)
    config = request.audit
    config.validate()
    request.protocol.validate()
    names = _names(request.scorers, SCORER_NAMES, "scorers")
    inputs.checked_first(request.features, request.output)
    with inputs.output_folder(request.output) as run:
        return _demo_command(request, names, run, t0, mesh)


def _demo_command(request: DemoRequest, names: list[str], run, t0: float, mesh) -> int:
    from ..evaluate.demo import demo_text, run_demo

    config, output, protocol = request.audit, request.output, request.protocol
    table = inputs.load_data("mtbench", None, other_judges=config.other_judges)
    inputs.check_columns(table, "mtbench", {"--cluster-by": config.cluster_by})  # before the encoder loads
    emb = inputs.features(request.features, inputs.to_embed(table, config), "mtbench", mesh, output.quiet)
    t_embed = time.perf_counter() - t0
    scorer = functools.partial(scorer_of, mesh=mesh, dtype=request.scoring.solver_dtype)
    res = run_demo(table, emb, scorers=[scorer(s) for s in names], default_rule=rule_of(DEFAULT_RULE, request.scoring),
                   paper_scorer=scorer("pot"), guarantee=config.guarantee, protocol=protocol, config=config,
                   progress=not output.quiet)  # fmt: skip
    if run is None:
        return 0
    files = _write(res, output, "mtbench", run)
    print(demo_text(res, first_scorer=names[0], eta=config.eta, p_ratio=protocol.p_ratio, source=emb.source))
    total = time.perf_counter() - t0
    print(wrote(output.out, files) + f" (embeddings {t_embed:.0f}s, total {total:.0f}s)")
    return 0


def add_evaluate_parser(sub) -> None:
    """Register ``evaluate`` on a subparsers object."""
    p = sub.add_parser("evaluate", help="the paper's protocol: repeated splits, hidden labels, Cons_orig/adj")
    inputs.add_data_options(p)
    add_audit_options(p)
    add_options(p, Protocol)
    p.add_argument(
        "--pairs",
        default=",".join(f"{s}:{r}" for s, r in DEFAULT_PAIRS),
        help="scorer:rule pairs to compare (default: the default audit and the paper's configuration)",
    )
    p.add_argument(
        "--scorers",
        help=f"instead of --pairs, the grid of these scorers (comma list of {sorted(SCORER_NAMES)} "
        f"or 'all'; default {DEFAULT_SCORER}) ...",
    )
    p.add_argument(
        "--rules",
        help=f"... and these rules (comma list of {sorted(RULE_NAMES)} or 'all'; default "
        f"{DEFAULT_RULES}; each scorer's audit runs with the first)",
    )
    p.add_argument("--sweep", help="p_ratio=V1,V2,... or m=V1,V2,... (the paper's Tables 6 and 7)")
    p.add_argument("--out", required=True, help="output folder (results.csv / .json, per_seed.csv, figures)")
    p.set_defaults(func=cmd_evaluate)


def add_demo_parser(sub) -> None:
    """Register ``demo`` on a subparsers object."""
    p = sub.add_parser(
        "demo", help="MT-Bench GPT-4 vs experts with MiniLM, end to end, then with --guarantee (0.8 unless given)"
    )
    inputs.add_data_options(p, data=False)
    add_audit_options(p)
    add_options(p, Protocol, include=("seeds", "p_ratio"))
    p.add_argument(
        "--scorers", default=",".join(DEMO_SCORERS), help="scorers compared with the default rule (comma list)"
    )
    p.add_argument("--out", default="results/demo", help="output folder (tables, figures)")
    p.set_defaults(func=cmd_demo)
