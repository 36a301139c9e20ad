"""The ``puaudit`` command line: ``audit``, ``evaluate``, ``demo`` (and attack, judge, consensus, probe).

    puaudit audit DATA [--embeddings FILE | --encoder minilm|smollm2|PATH] [--scorer knn] [--rule two-sided]
                  [--flip-threshold 0.5] [--confidence 0.9] [--cluster-by COLUMN] [--m M] [--out DIR]
    puaudit evaluate DATA [--embeddings FILE | --encoder ...] [--pairs knn:two-sided,pot:seed]
                     [--scorers knn,pot-exact|all --rules two-sided,seed|all] [--seeds 10] [--p-ratio 0.2]
                     [--split-by COLUMN] [--ceiling] [--sweep p_ratio=0.05,0.2] --out DIR
    puaudit demo [--out DIR]

This module only parses arguments and dispatches. The options and their defaults come from the
config dataclasses (:class:`~puaudit_jax.audit.AuditConfig`, :class:`~puaudit_jax.evaluate.Protocol`,
:class:`~puaudit_jax.embed.EmbedConfig`, the calibrated rule's threshold and confidence) through
:mod:`puaudit_jax.options`. DATA is a comparison file (jsonl / csv / parquet; see
:mod:`puaudit_jax.datasets.comparisons`) or a bundled set: ``mtbench``, ``llmfao-gpt4``, ``llmfao-gpt3``.

audit: ``DIR/items.csv`` and ``DIR/items.parquet`` (one row per input comparison), ``DIR/report.json``
(:class:`~puaudit_jax.audit.AuditReport`), ``DIR/figure2.png`` and, for calibrated rules,
``DIR/calibration.png``. ``--hide-labels F`` hides the human verdicts of a share F of each type's
labelled rows (audited as unlabelled and scored against their hidden labels in the report).

evaluate: ``DIR/results.csv`` (one row per scorer, rule and question type), ``DIR/results.json``
(the same plus the settings), ``DIR/per_seed.csv``, ``DIR/figure3.png``, ``DIR/figure2.png`` and,
when the first scorer's rule is calibrated, ``DIR/calibration.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from puaudit_jax.cli.probe import add_probe_parser
from puaudit_runtime.flags import add_device_arguments, mesh_from_args

from ..audit import DEFAULT_RULE, DEFAULT_SCORER, AuditConfig
from ..audit.embed import EmbedConfig, load_embeddings, save_embeddings, table_embeddings
from ..audit.rules import RULES, CalibratedRule, get_rule, needs_crossfit
from ..audit.scorers import SCORERS, get_scorer
from ..datasets import BUNDLED
from ..datasets.verdicts import MISSING
from ..evaluate.protocol import DEFAULT_PAIRS, Protocol
from ..quantify.estimators import check_level
from ..quantify.pipeline import QuantifyConfig
from .consensus import add_consensus_parser
from .judges import add_attack_parsers, load_data
from .options import add_options, options_from_args

AUDIT_FIELDS = ("m", "eta", "alpha1", "alpha2", "holdout", "group_by", "min_group_size", "folds", "cluster_by", "seed")
RULE_FIELDS, RULE_RENAME = ("threshold", "confidence"), {"threshold": "flip_threshold"}
EMBED_FIELDS = ("cache_dir", "no_cache", "batch_size", "max_length", "long_inputs")


def _mesh(args):
    """The mesh of --devices / --mesh (joining the cluster the flags name first), or None."""
    try:
        mesh = mesh_from_args(args)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    if mesh is not None:
        import jax

        print(
            f"[puaudit] {mesh.size} devices ({mesh.devices.flat[0].platform}), mesh {dict(mesh.shape)}, "
            f"process {jax.process_index()} of {jax.process_count()}",
            file=sys.stderr,
        )
    return mesh


def _writes() -> bool:
    """Whether this process writes the outputs (process 0 of a cluster, or the only one)."""
    import jax

    return jax.process_index() == 0


def _scorer(name: str, args):
    """A scorer name, or for the entropic partial-OT scorer an instance with the mesh (--devices /
    --mesh) and the float type (--solver-dtype) of its Sinkhorn solve."""
    if name != "pot" or (args.mesh_obj is None and args.solver_dtype == "float32"):
        return name
    return get_scorer(name, mesh=args.mesh_obj, dtype=args.solver_dtype)


def _rule(name: str, args):
    """A rule by name; calibrated rules take --flip-threshold and --confidence."""
    if needs_crossfit(name):
        return get_rule(name, **options_from_args(args, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME))
    return name


def _names(value: str, registry, what: str) -> list[str]:
    names = list(registry) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in registry]
    if bad:
        raise SystemExit(f"error: unknown {what} {bad}; use {sorted(registry)} or 'all'")
    return names


def _pairs(value: str) -> list[tuple[str, str]]:
    """``scorer:rule,scorer:rule`` -> [(scorer, rule)], names checked."""
    pairs = [tuple(p.strip().split(":", 1)) for p in value.split(",") if p.strip()]
    bad = [":".join(p) for p in pairs if len(p) != 2 or p[0] not in SCORERS or p[1] not in RULES]
    if bad or not pairs:
        raise SystemExit(
            f"error: --pairs needs scorer:rule items with scorers {sorted(SCORERS)} and rules "
            f"{sorted(RULES)}; got {bad or value!r}"
        )
    return pairs


def _audit_config(args, **fields) -> AuditConfig:
    """The :class:`AuditConfig` of the command line (``fields`` override), validated."""
    config = AuditConfig(**{**options_from_args(args, AuditConfig, include=AUDIT_FIELDS), **fields})
    config.validate()
    return config


def _embed_config(args) -> EmbedConfig:
    """The :class:`EmbedConfig` of the command line, validated."""
    config = EmbedConfig(encoder=args.encoder, **options_from_args(args, EmbedConfig, include=EMBED_FIELDS))
    config.validate()
    return config


def _check_out(folder: str) -> None:
    """The output folder exists (created) and this process can write there: checked before any
    expensive step, so a bad --out fails in a second, not after the embedding."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"--out {folder}: cannot write there ({err.strerror or err})") from None


def _features(args, table):
    """PairEmbeddings from --embeddings, or computed by the probes encoder the options name."""
    if args.embeddings:
        return load_embeddings(args.embeddings)
    config = _embed_config(args)
    t = time.perf_counter()
    emb = table_embeddings(table, config, mesh=args.mesh_obj, progress=not args.quiet)
    print(
        f"embedded {len(emb.ids)} comparisons with {config.resolved().encoder} (d={emb.dim}) in "
        f"{time.perf_counter() - t:.1f}s",
        file=sys.stderr,
    )
    if args.save_embeddings:
        save_embeddings(emb, args.save_embeddings)
    return emb


def _checked_first(args) -> None:
    """Everything that can be checked before loading data or a model: embedding options, --out."""
    if not args.embeddings:
        _embed_config(args)
    _check_out(args.out)


def _output_folder(args):
    """The locked :class:`RunFolder` of --out for the process that writes, else a context of None."""
    from .run_folder import RunFolder

    return RunFolder(args.out, getattr(args, "argv", [])) if _writes() else contextlib.nullcontext(None)


def cmd_audit(args) -> int:
    args.mesh_obj = _mesh(args)
    config = _audit_config(args, scorer=_scorer(args.scorer, args), rule=_rule(args.rule, args))
    _checked_first(args)
    with _output_folder(args) as run:
        return _audit_command(args, config, run)


def _audit_command(args, config: AuditConfig, run) -> int:
    from ..audit import run_audit, write_result
    from ..evaluate import split_labels
    from ..evaluate.consistency import with_hidden_labels

    table = load_data(args.data, args.include_unlabelled)
    emb = _features(args, table)
    truth = None
    if args.hide_labels:
        split = split_labels(table, p_ratio=1 - args.hide_labels, seed=args.seed)
        table, truth = split.table, split.truth
    try:
        result = run_audit(table, emb, config)
    except ValueError as err:
        if "U is empty" not in str(err):
            raise
        hint = " (use --hide-labels F to audit a share of the labelled items, or --include-unlabelled)"
        raise ValueError(f"{err}{hint}") from None
    if truth is not None:
        result = with_hidden_labels(result, truth, args.hide_labels)
    if run is None:
        return 0
    files = write_result(result, args.out)
    if not args.no_figures:
        from ..audit.plots import audit_figures

        files += audit_figures(result, truth, args.out, title=args.data)
    run.finish(files)
    print(result.report.summary())
    if truth is not None:
        print(result.report.hidden_labels.table())
    print(f"wrote {args.out}/" + ", ".join(files))
    return 0


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


def _compared(args) -> dict:
    """{"pairs": [...]} or the grid {"scorers": [...], "rules": [...]} the options ask for."""
    if args.scorers or args.rules:
        return {
            "scorers": [_scorer(s, args) for s in _names(args.scorers or DEFAULT_SCORER, SCORERS, "scorers")],
            "rules": [_rule(r, args) for r in _names(args.rules or f"{DEFAULT_RULE},seed", RULES, "rules")],
        }
    return {"pairs": [(_scorer(s, args), _rule(r, args)) for s, r in _pairs(args.pairs)]}


def cmd_evaluate(args) -> int:
    args.mesh_obj = _mesh(args)
    config, compared, swept = _audit_config(args), _compared(args), _sweep(args.sweep)
    proto = options_from_args(args, Protocol, include=("seeds", "p_ratio", "split_by", "ceiling"))
    Protocol(**proto).validate()
    _checked_first(args)
    with _output_folder(args) as run:
        return _evaluate_command(args, config, compared, swept, proto, run)


def _evaluate_command(args, config: AuditConfig, compared: dict, swept, proto: dict, run) -> int:
    from ..evaluate import evaluate, summary_table, sweep, write_evaluation

    table = load_data(args.data, args.include_unlabelled)
    emb = _features(args, table)
    kwargs = dict(config=config, progress=not args.quiet, **compared, **proto)
    if swept:
        kwargs.pop(swept[0], None)
        res = sweep(table, emb, param=swept[0], values=swept[1], **kwargs)
    else:
        res = evaluate(table, emb, **kwargs)
    if run is None:
        return 0
    files = write_evaluation(res, args.out, data=args.data)
    if not args.no_figures:
        from ..evaluate.plots import evaluation_figures

        files += evaluation_figures(res, args.out, data=args.data)
    run.finish(files)
    overall = res.summary[res.summary.question_type == "all"]
    print(summary_table(res.summary) if not swept else overall.to_string(index=False, float_format="{:.4f}".format))
    print(f"wrote {args.out}/" + ", ".join(files))
    return 0


def cmd_demo(args) -> int:
    t0 = time.perf_counter()
    args.data, args.include_unlabelled = "mtbench", None
    args.mesh_obj = _mesh(args)
    config = _audit_config(args)
    Protocol(seeds=args.seeds, p_ratio=args.p_ratio).validate()
    names = _names(args.scorers, SCORERS, "scorers")
    _checked_first(args)
    with _output_folder(args) as run:
        return _demo_command(args, config, names, run, t0)


def _demo_command(args, config: AuditConfig, names: list[str], run, t0: float) -> int:
    from ..evaluate import write_evaluation
    from ..evaluate.demo import demo_text, run_demo

    table = load_data("mtbench", None)
    emb = _features(args, table)
    t_embed = time.perf_counter() - t0
    res = run_demo(table, emb, scorers=[_scorer(s, args) for s in names], default_rule=_rule(DEFAULT_RULE, args),
                   seed_scorer=_scorer("pot", args), config=config, seeds=args.seeds, p_ratio=args.p_ratio,
                   progress=not args.quiet)  # fmt: skip
    if run is None:
        return 0
    files = write_evaluation(res, args.out, data="mtbench")
    if not args.no_figures:
        from ..evaluate.plots import evaluation_figures

        files += evaluation_figures(res, args.out, data="mtbench")
    run.finish(files)
    print(demo_text(res, first_scorer=names[0], eta=args.eta, p_ratio=args.p_ratio, source=emb.source))
    total = time.perf_counter() - t0
    print(f"wrote {args.out}/" + ", ".join(files) + f" (embeddings {t_embed:.0f}s, total {total:.0f}s)")
    return 0


def _data_options(p: argparse.ArgumentParser, data: bool = True) -> None:
    """DATA, where its embeddings come from, and the device flags."""
    if data:
        p.add_argument("data", help=f"comparison file or bundled set ({', '.join(BUNDLED)})")
        p.add_argument(
            "--include-unlabelled",
            action="store_true",
            default=None,
            help="bundled sets: add the judge-only comparisons (LLMFAO: 1,097 pairs)",
        )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--embeddings", help=".npz with arrays id, a, b (F(x, o_A), F(x, o_B))")
    add_options(src, EmbedConfig, include=("encoder",))
    add_options(p, EmbedConfig, include=EMBED_FIELDS)
    p.add_argument("--save-embeddings", help="also write the computed embeddings to this .npz")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-figures", action="store_true")
    add_device_arguments(p)


def _audit_options(p: argparse.ArgumentParser) -> None:
    """The audit's settings, generated from AuditConfig and the calibrated rule's fields."""
    add_options(p, AuditConfig, include=AUDIT_FIELDS)
    add_options(p, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME)
    p.add_argument(
        "--solver-dtype",
        choices=["float32", "float64"],
        default="float32",
        help="float type of the pot scorer's Sinkhorn solve (float64: results that do not depend on "
        "the order of float additions, e.g. the same items on any number of devices; ~2x slower)",
    )


def _add_audit_parser(sub) -> None:
    p = sub.add_parser("audit", help="audit the unlabelled judge verdicts of DATA")
    _data_options(p)
    _audit_options(p)
    p.add_argument(
        "--scorer",
        default=AuditConfig.scorer,
        choices=sorted(SCORERS),
        help=f"default {AuditConfig.scorer} (picked by the data; the seed's is pot)",
    )
    p.add_argument(
        "--rule",
        default=AuditConfig.rule,
        choices=sorted(RULES),
        help=f"default {AuditConfig.rule} (calibrated, abstaining; the seed's is seed)",
    )
    p.add_argument("--hide-labels", type=float, help="hide the human labels of this share of labelled rows")
    p.add_argument("--out", default="puaudit-out")
    p.set_defaults(func=cmd_audit)


def _add_evaluate_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="the seed's protocol: repeated splits, hidden labels, Cons_orig/adj")
    _data_options(p)
    _audit_options(p)
    add_options(p, Protocol)
    p.add_argument(
        "--pairs",
        default=",".join(f"{s}:{r}" for s, r in DEFAULT_PAIRS),
        help="scorer:rule pairs to compare (default: the default audit and the seed's configuration)",
    )
    p.add_argument(
        "--scorers",
        help=f"instead of --pairs, the grid of these scorers (comma list of {sorted(SCORERS)} "
        f"or 'all'; default {DEFAULT_SCORER}) ...",
    )
    p.add_argument(
        "--rules",
        help=f"... and these rules (comma list of {sorted(RULES)} or 'all'; default "
        f"{DEFAULT_RULE},seed; each scorer's audit runs with the first)",
    )
    p.add_argument("--sweep", help="p_ratio=V1,V2,... or m=V1,V2,... (the seed's Tables 6 and 7)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_evaluate)


def cmd_quantify(args) -> int:
    from ..audit.predictions import audit_for_quantify
    from ..audit.write import read_items
    from ..quantify import quantify, write_quantification

    options = options_from_args(args, QuantifyConfig)
    check_level(options["level"])
    args.mesh_obj = _mesh(args) if args.with_audit else None
    _checked_first(args)
    with _output_folder(args) as run:
        table = load_data(args.data, args.include_unlabelled)
        audit_items = None if args.audit is None else read_items(args.audit)
        if args.with_audit:
            audit_items = audit_for_quantify(table, _features(args, table.assign(human=MISSING)))
        result = quantify(table, audit_items=audit_items, **options)
        files = write_quantification(result, args.out, data=args.data)
        if not args.no_figures:
            import matplotlib.pyplot as plt

            from ..quantify.plots import forest_plot

            plt.close(forest_plot(result.to_frame(), Path(args.out) / "forest.png", title=f"{args.data}"))
            files.append("forest.png")
        run.finish(files)
    columns = ["target", "estimator", "estimate", "lower", "upper", "n_labelled", "n_unlabelled", "note"]
    print(result.to_frame()[columns].to_string(index=False, float_format="{:.4f}".format))
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(f"wrote {args.out}/" + ", ".join(files))
    return 0


def _add_quantify_parser(sub) -> None:
    p = sub.add_parser("quantify", help="agreement, A share, win rates and the Elo leaderboard with intervals (PPI++)")
    _data_options(p)
    add_options(p, QuantifyConfig)
    audit = p.add_mutually_exclusive_group()
    audit.add_argument("--with-audit", action="store_true",
                       help="also run the default calibrated audit (tie labels hidden; embeddings as for "
                       "`puaudit audit`) and add PPI++ with its expected human verdicts")  # fmt: skip
    audit.add_argument("--audit", help="an audit's output folder (or its items.csv) of the same data, run "
                       "with a calibrated rule and the tie labels hidden: adds PPI++ with its predictions")  # fmt: skip
    p.add_argument("--out", default="puaudit-quantify")
    p.set_defaults(func=cmd_quantify)


def _add_demo_parser(sub) -> None:
    from ..evaluate.demo import DEMO_SCORERS

    p = sub.add_parser("demo", help="MT-Bench GPT-4 vs experts with MiniLM, end to end")
    _data_options(p, data=False)
    _audit_options(p)
    add_options(p, Protocol, include=("seeds", "p_ratio"))
    p.add_argument("--scorers", default=",".join(DEMO_SCORERS))
    p.add_argument("--out", default="results/demo")
    p.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="puaudit",
        description="Audit LLM-judge verdicts with partial OT "
        "(PUAudit) and evaluate the audit against hidden human labels.",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_audit_parser(sub)
    _add_evaluate_parser(sub)
    _add_demo_parser(sub)
    _add_quantify_parser(sub)
    add_attack_parsers(sub)
    add_consensus_parser(sub)
    add_probe_parser(sub)
    return parser


class CommandError(SystemExit):
    """A user error: its message is printed on stderr and the process exits with status 2."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


# What a bad file, option or folder can raise; anything else is a bug and keeps its traceback.
USER_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile)


def main(argv: list[str] | None = None) -> int:
    """Run a command. User errors print ``error: ...`` (naming the file, row, column or option) and
    exit with status 2; ``--debug`` anywhere on the command line shows the traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args = build_parser().parse_args([a for a in argv if a != "--debug"])
    args.argv = ["puaudit", *argv]
    try:
        if getattr(args, "hide_labels", None) is not None and not 0 < args.hide_labels < 1:
            raise ValueError(f"--hide-labels must be in (0, 1), got {args.hide_labels}")
        return args.func(args)
    except SystemExit as err:  # a command's own "error: ..." exit
        if isinstance(err, CommandError) or not isinstance(err.code, str):
            raise
        message = err.code
    except USER_ERRORS as err:
        if debug:
            raise
        message = f"error: {err}"
    print(message, file=sys.stderr)
    raise CommandError(message)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
