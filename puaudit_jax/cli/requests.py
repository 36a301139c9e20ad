"""What each data command is asked to do: one frozen request per command, read from the command line once.

A command is laid out in two steps: ``cmd_x(args)`` calls ``x_request(args)`` (here: the only
functions that read argparse's namespace) and hands the request to ``run_x(request)``, whose helpers
take the parts they need (``features(request.features, ...)``, ``output_folder(request.output)``).
The parts are shared across commands: :class:`DataRequest` (DATA and how it is read),
:class:`FeatureRequest` (where the embeddings come from), :class:`~puaudit_runtime.flags.DeviceFlags`,
:class:`OutputRequest` (the output folder and what is printed or drawn), :class:`ScoringRequest`
(the scorer's float type, the calibrated rule's settings) and :class:`AuditSource` (the audit
``quantify`` / ``plan-labels`` read), next to each command's engine configs (:class:`AuditConfig`,
:class:`QuantifyConfig`, :class:`PlanConfig`, :class:`MonitorConfig`, :class:`Protocol`).

A builder makes the configs without validating them, except where making one was the command's first
check already (:class:`QuantifyConfig`, :class:`MonitorConfig`, the consensus configs, serve-local's
``ServeConfig``); an :class:`EncodeConfig`, which checks its values when made, is made by
:meth:`FeatureRequest.config`. ``run_x`` makes the other checks in the order and with the messages they
always had. No numerical library is imported here: the parser imports this module.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from probes.config import FitConfig
from probes.encode_config import EncodeConfig
from puaudit_runtime.flags import DeviceFlags

from ..audit.config import ENCODE_OPTIONS, AuditConfig, EmbedConfig
from ..audit.rules import CalibratedRule
from ..consensus.config import AlignConfig, BTConfig, EloConfig, ScoresConfig
from ..datasets.read_config import ReadConfig
from ..evaluate.config import DEMO_GUARANTEE, Protocol
from ..judges.names import API_KEY_ENV
from ..quantify.config import PlanConfig, QuantifyConfig
from ..quantify.monitor_config import MonitorConfig
from .options import option_name, options_from_args

READ_RENAME = {"read_as": "as"}
"""``ReadConfig.read_as`` is spelt ``--as`` (``--as judge``)."""
EMBED_OWN_FIELDS = ("cache_dir", "no_cache")
"""The options set from :class:`EmbedConfig`'s own fields (``--encoder`` stands apart: it excludes --embeddings)."""
ENCODE_FIELDS = tuple(ENCODE_OPTIONS)
"""The options set from fields of its ``encoding`` (an ``EncodeConfig``): --batch-size, --max-length, --long-inputs."""
EMBED_FIELDS = (*EMBED_OWN_FIELDS, *ENCODE_FIELDS)
"""Destinations of every embedding option but --encoder."""
DEVICE_FIELDS = tuple(f.name for f in dataclasses.fields(DeviceFlags))
"""Destinations of the device and cluster flags (:func:`puaudit_runtime.flags.add_device_arguments`)."""
AUDIT_FIELDS = ("m", "eta", "alpha1", "alpha2", "holdout", "group_by", "min_group_size", "folds", "cluster_by", "seed",
                "evidence", "other_judges", "guarantee", "delta", "cascade", "human_ties", "certify",
                "spot_checks")  # fmt: skip
"""The :class:`AuditConfig` fields ``audit``, ``evaluate`` and ``demo`` take as options."""
RULE_FIELDS, RULE_RENAME = ("threshold", "confidence"), {"threshold": "flip_threshold"}
AUDIT_EVIDENCE = ("evidence", "other_judges")  # what --with-audit weighs, as for `puaudit audit`
WITH_AUDIT_ONLY = ("embeddings", "encoder", *EMBED_FIELDS, "save_embeddings", *DEVICE_FIELDS, *AUDIT_EVIDENCE)
"""Destinations of the options only the audit --with-audit runs reads (its embeddings, devices and evidence)."""
PROTOCOL_FIELDS = ("seeds", "p_ratio", "split_by", "ceiling")
FIT_RENAME = {"n_components": "components"}
BT_FIELDS = ("ties", "ridge", "anchor")
ELO_FIELDS, ELO_RENAME = ("k", "n_orders"), {"n_orders": "orders"}
ALIGN_FIELDS = ("anchor", "mode", "w_anchor", "w_rank", "w_consensus", "steps", "seed")


@dataclass(frozen=True)
class DataRequest:
    """DATA and how it is read.

    Attributes:
        files: the files (or the bundled set's name) DATA names.
        name: DATA for people: the files joined by ", ".
        read: how the files are read (--format, --columns, --labels, --answers, --as, ...).
        include_unlabelled: bundled sets: add the judge-only comparisons (None: not given).
    """

    files: tuple[str, ...]
    name: str
    read: ReadConfig = ReadConfig()
    include_unlabelled: bool | None = None


@dataclass(frozen=True)
class FeatureRequest:
    """Where the embeddings come from: a file (--embeddings), or the encoder the options name.

    Attributes:
        embeddings: the .npz to read (None: computed).
        save_embeddings: also write the computed embeddings to this .npz (None: not written).
        encoder: --encoder (None: the default).
        settings: ``(destination, value)`` of every other embedding option (:data:`EMBED_FIELDS`).
    """

    embeddings: str | None = None
    save_embeddings: str | None = None
    encoder: str | None = None
    settings: tuple[tuple[str, object], ...] = ()

    def config(self) -> EmbedConfig:
        """The :class:`EmbedConfig` of the options, validated (ValueError naming a setting)."""
        given = dict(self.settings)
        encoding = EncodeConfig(**{k: v for k, v in given.items() if k in ENCODE_FIELDS})
        own = {k: v for k, v in given.items() if k in EMBED_OWN_FIELDS}
        config = EmbedConfig(encoder=self.encoder, **own, encoding=encoding)
        config.validate()
        return config

    def changed(self) -> list[str]:
        """The destinations of the embedding options given a value other than their default, in order."""
        default = EmbedConfig()
        return [k for k, v in self.settings if v != getattr(default.encoding if k in ENCODE_FIELDS else default, k)]


@dataclass(frozen=True)
class OutputRequest:
    """Where the outputs go and what is shown.

    Attributes:
        out: the output folder (or file, for ``convert``).
        argv: the command line, for the run folder's manifest.
        quiet: no progress bars, no read report.
        no_figures: write no figures.
    """

    out: str
    argv: tuple[str, ...] = ()
    quiet: bool = False
    no_figures: bool = False


@dataclass(frozen=True)
class ScoringRequest:
    """The scorer's and the calibrated rule's settings that are no :class:`AuditConfig` field.

    Attributes:
        solver_dtype: the float type of the pot scorer's Sinkhorn solve (--solver-dtype).
        rule_options: ``(CalibratedRule field, value)`` of --flip-threshold and --confidence.
    """

    solver_dtype: str = "float32"
    rule_options: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class AuditSource:
    """The audit whose P(judge wrong) ``quantify`` and ``plan-labels`` read.

    Attributes:
        with_audit: run the default calibrated audit (--with-audit).
        audit: an audit's output folder or items.csv (--audit), or None.
        unused: the options only the --with-audit audit reads that were given a value (``--encoder``, ...).
    """

    with_audit: bool = False
    audit: str | None = None
    unused: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditRequest:
    """``puaudit audit``: the audit's settings (scorer by name: its mesh is built when it runs)."""

    data: DataRequest
    features: FeatureRequest
    devices: DeviceFlags
    output: OutputRequest
    audit: AuditConfig
    scoring: ScoringRequest
    hide_labels: float | None = None


@dataclass(frozen=True)
class QuantifyRequest:
    """``puaudit quantify``: the estimates' settings, the evidence an audit weighs, where the audit comes from."""

    data: DataRequest
    features: FeatureRequest
    devices: DeviceFlags
    output: OutputRequest
    quantify: QuantifyConfig
    evidence: AuditConfig
    source: AuditSource
    plan: str | None = None


@dataclass(frozen=True)
class PlanRequest:
    """``puaudit plan-labels``: the plan's settings (validated when it runs), the audit's evidence and source."""

    data: DataRequest
    features: FeatureRequest
    devices: DeviceFlags
    output: OutputRequest
    plan: PlanConfig
    evidence: AuditConfig
    source: AuditSource


@dataclass(frozen=True)
class CompareRequest:
    """What ``evaluate`` compares, as the options spell it (names checked when it runs).

    Attributes:
        pairs: ``scorer:rule,...`` (--pairs).
        scorers: the grid's scorers, comma list or "all" (--scorers), or None.
        rules: the grid's rules, comma list or "all" (--rules), or None.
        sweep: ``p_ratio=V1,V2`` or ``m=V1,V2`` (--sweep), or None.
    """

    pairs: str = ""
    scorers: str | None = None
    rules: str | None = None
    sweep: str | None = None


@dataclass(frozen=True)
class EvaluateRequest:
    """``puaudit evaluate``: the protocol, the audit's settings and what is compared."""

    data: DataRequest
    features: FeatureRequest
    devices: DeviceFlags
    output: OutputRequest
    audit: AuditConfig
    scoring: ScoringRequest
    protocol: Protocol
    compare: CompareRequest


@dataclass(frozen=True)
class DemoRequest:
    """``puaudit demo``: MT-Bench with the audit's settings (guarantee: the demo's unless given) and the scorers."""

    features: FeatureRequest
    devices: DeviceFlags
    output: OutputRequest
    audit: AuditConfig
    scoring: ScoringRequest
    protocol: Protocol
    scorers: str


@dataclass(frozen=True)
class MonitorRequest:
    """``puaudit monitor``: DATA, the monitoring settings, the output folder."""

    data: DataRequest
    output: OutputRequest
    monitor: MonitorConfig


@dataclass(frozen=True)
class ConvertRequest:
    """``puaudit convert``: DATA and the table to write (``output.out``)."""

    data: DataRequest
    output: OutputRequest


# The builders: every function that reads ``args`` is below.


def data_request(args: argparse.Namespace) -> DataRequest:
    """DATA of the command line and its read options (:class:`ReadConfig`)."""
    files = tuple(getattr(args, "data_files", None) or [args.data])
    read = ReadConfig(**options_from_args(args, ReadConfig, rename=READ_RENAME))
    return DataRequest(files, args.data, read, getattr(args, "include_unlabelled", None))


def feature_request(args: argparse.Namespace) -> FeatureRequest:
    """--embeddings / --encoder and the embedding settings, --save-embeddings."""
    settings = {**options_from_args(args, EmbedConfig, include=EMBED_OWN_FIELDS),
                **options_from_args(args, EncodeConfig, include=ENCODE_FIELDS)}  # fmt: skip
    return FeatureRequest(args.embeddings, args.save_embeddings, args.encoder, tuple(settings.items()))


def embed_config(args: argparse.Namespace) -> EmbedConfig:
    """The :class:`EmbedConfig` of the command line, validated."""
    return feature_request(args).config()


def device_flags(args: argparse.Namespace) -> DeviceFlags:
    """The values of the device flags in ``args`` (a command without the cluster flags: their defaults)."""
    return DeviceFlags(**{name: getattr(args, name) for name in DEVICE_FIELDS if hasattr(args, name)})


def output_request(args: argparse.Namespace) -> OutputRequest:
    """--out, the command line (for the manifest), --quiet and --no-figures."""
    argv = tuple(getattr(args, "argv", ()))
    return OutputRequest(args.out, argv, bool(getattr(args, "quiet", False)), bool(getattr(args, "no_figures", False)))


def scoring_request(args: argparse.Namespace) -> ScoringRequest:
    """--solver-dtype, --flip-threshold and --confidence."""
    rule = options_from_args(args, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME)
    return ScoringRequest(args.solver_dtype, tuple(rule.items()))


def audit_fields(args: argparse.Namespace) -> dict:
    """``{AuditConfig field: value}`` of the audit options (:data:`AUDIT_FIELDS`)."""
    return options_from_args(args, AuditConfig, include=AUDIT_FIELDS)


def audit_source(args: argparse.Namespace) -> AuditSource:
    """--with-audit | --audit, and the options only the --with-audit audit reads that were given a value."""
    given = tuple(option_name(d) for d, default in args.with_audit_only.items() if getattr(args, d) != default)
    return AuditSource(args.with_audit, args.audit, given)


def audit_request(args: argparse.Namespace) -> AuditRequest:
    """The request of ``puaudit audit`` (scorer and rule by name; checked by :func:`~.audit.run_audit_command`)."""
    config = AuditConfig(**audit_fields(args), scorer=args.scorer, rule=args.rule)
    return AuditRequest(data_request(args), feature_request(args), device_flags(args), output_request(args), config,
                        scoring_request(args), args.hide_labels)  # fmt: skip


def quantify_request(args: argparse.Namespace) -> QuantifyRequest:
    """The request of ``puaudit quantify``; its :class:`QuantifyConfig` makes its checks here, first."""
    config = QuantifyConfig(**options_from_args(args, QuantifyConfig))  # its checks, before any data is read
    evidence = AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_EVIDENCE))
    return QuantifyRequest(data_request(args), feature_request(args), device_flags(args), output_request(args),
                           config, evidence, audit_source(args), args.plan)  # fmt: skip


def plan_request(args: argparse.Namespace) -> PlanRequest:
    """The request of ``puaudit plan-labels``."""
    config = PlanConfig(**options_from_args(args, PlanConfig))
    evidence = AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_EVIDENCE))
    return PlanRequest(data_request(args), feature_request(args), device_flags(args), output_request(args), config,
                       evidence, audit_source(args))  # fmt: skip


def evaluate_request(args: argparse.Namespace) -> EvaluateRequest:
    """The request of ``puaudit evaluate`` (names and --sweep checked when it runs)."""
    protocol = Protocol(**options_from_args(args, Protocol, include=PROTOCOL_FIELDS))
    compare = CompareRequest(args.pairs, args.scorers, args.rules, args.sweep)
    return EvaluateRequest(data_request(args), feature_request(args), device_flags(args), output_request(args),
                           AuditConfig(**audit_fields(args)), scoring_request(args), protocol, compare)  # fmt: skip


def demo_request(args: argparse.Namespace) -> DemoRequest:
    """The request of ``puaudit demo``: its guarantee is :data:`DEMO_GUARANTEE` unless --guarantee is given."""
    guarantee = DEMO_GUARANTEE if args.guarantee is None else args.guarantee
    config = AuditConfig(**{**audit_fields(args), "guarantee": guarantee})
    protocol = Protocol(seeds=args.seeds, p_ratio=args.p_ratio)
    return DemoRequest(feature_request(args), device_flags(args), output_request(args), config, scoring_request(args),
                       protocol, args.scorers)  # fmt: skip


def monitor_request(args: argparse.Namespace) -> MonitorRequest:
    """The request of ``puaudit monitor``; its :class:`MonitorConfig` makes its checks here, first."""
    config = MonitorConfig(**options_from_args(args, MonitorConfig))  # its checks, before any data is read
    return MonitorRequest(data_request(args), output_request(args), config)


def convert_request(args: argparse.Namespace) -> ConvertRequest:
    """The request of ``puaudit convert``."""
    return ConvertRequest(data_request(args), output_request(args))


@dataclass(frozen=True)
class JudgeSettings:
    """The judge (and the attacks' rewrite model) the options name, and its HTTP client's settings.

    Attributes:
        judge: "local" (the in-process model) or "openai" (an OpenAI-compatible server).
        model: local: model name or folder; openai: the served model's name.
        base_url: the server's endpoint (openai).
        api_key_env: the environment variable holding the API key.
        timeout: seconds per HTTP request.
        concurrency: parallel HTTP requests.
        max_retries: extra attempts of a request after a transient failure.
        verdict: "text" or "logprob" (openai).
        chat_template: the model whose chat template renders a logprob prompt.
        top_logprobs: tokens returned per position (logprob).
        max_length: the local judge's prompt cap in tokens.
        predict_type: the local judge also scores the question type.
        cache_dir: the response cache folder.
        generator: the rewrite model's kind (None: as ``judge``).
        gen_base_url: the rewrite model's endpoint (None: ``base_url``).
        gen_model: the rewrite model (None: ``model``).
        max_new_tokens: the rewrite's length cap in tokens.
    """

    judge: str = "local"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = API_KEY_ENV
    timeout: float = 120.0
    concurrency: int = 4
    max_retries: int = 4
    verdict: str = "text"
    chat_template: str = "smollm2"
    top_logprobs: int = 20
    max_length: int | None = None
    predict_type: bool = False
    cache_dir: str | None = None
    generator: str | None = None
    gen_base_url: str | None = None
    gen_model: str | None = None
    max_new_tokens: int = 512


@dataclass(frozen=True)
class JudgeRequest:
    """``puaudit judge`` and ``puaudit attack``: DATA, the judge, how the run is judged a failure.

    Attributes:
        data: DATA and how it is read.
        output: the output folder (its manifest's command line), --quiet.
        judge: the judge and its client.
        limit: only the first N comparisons (None: all).
        max_failures: the largest fraction of pairs whose requests may fail.
        single_order: judge one order only (``judge``).
        attack: what is done to the judge's loser (``attack``; None for ``judge``).
        emotion: the sentiment attack's tone.
        original: the verdicts before the attack: "rejudge" or "column".
    """

    data: DataRequest
    output: OutputRequest
    judge: JudgeSettings
    limit: int | None = None
    max_failures: float = 0.2
    single_order: bool = False
    attack: str | None = None
    emotion: str = "cheerful"
    original: str = "rejudge"


@dataclass(frozen=True)
class ProbeRequest:
    """``puaudit probe fit | predict``.

    Attributes:
        command: "fit" or "predict".
        data: the table of dialogues.
        out: the probe file (fit) or the predictions (predict).
        devices: --devices / --mesh.
        target: the human score column (fit).
        fit: the fit's settings (fit; validated when it runs).
        model: the probe file to read (predict).
    """

    command: str
    data: str
    out: str
    devices: DeviceFlags
    target: str | None = None
    fit: FitConfig | None = None
    model: str | None = None


@dataclass(frozen=True)
class ConsensusRequest:
    """``puaudit consensus scores | align | table4``.

    Attributes:
        command: "scores", "align" or "table4".
        source: VERDICTS (scores) or MATRIX (align).
        output: the output folder, --no-figures (align).
        scores: the scores' settings (scores).
        bt: the Bradley-Terry settings (scores).
        elo: the Elo settings (scores).
        align: the alignment's settings (align).
        human: the row of MATRIX holding human scores (align).
    """

    command: str
    source: str | None = None
    output: OutputRequest | None = None
    scores: ScoresConfig | None = None
    bt: BTConfig | None = None
    elo: EloConfig | None = None
    align: AlignConfig | None = None
    human: str | None = None


def judge_settings(args: argparse.Namespace) -> JudgeSettings:
    """The judge options of the command line (an option the command lacks: its default)."""
    names = [f.name for f in dataclasses.fields(JudgeSettings)]
    return JudgeSettings(**{name: getattr(args, name) for name in names if hasattr(args, name)})


def judge_request(args: argparse.Namespace) -> JudgeRequest:
    """The request of ``puaudit judge`` or ``puaudit attack``."""
    argv = tuple(getattr(args, "argv", None) or ["puaudit", args.command])
    output = OutputRequest(args.out, argv, args.quiet)
    extra = {k: getattr(args, k) for k in ("single_order", "attack", "emotion", "original") if hasattr(args, k)}
    return JudgeRequest(data_request(args), output, judge_settings(args), args.limit, args.max_failures, **extra)


def serve_config(args: argparse.Namespace):
    """The ``ServeConfig`` of ``puaudit serve-local`` (:mod:`puaudit_jax.judges.serve`); a bad value: SystemExit."""
    from ..judges.serve import ServeConfig

    try:
        return ServeConfig(**options_from_args(args, ServeConfig))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def probe_request(args: argparse.Namespace) -> ProbeRequest:
    """The request of ``puaudit probe fit`` or ``puaudit probe predict``."""
    devices = device_flags(args)
    if args.probe_command == "fit":
        fit = FitConfig(**options_from_args(args, FitConfig, rename=FIT_RENAME))
        return ProbeRequest("fit", args.data, args.out, devices, target=args.target, fit=fit)
    return ProbeRequest("predict", args.data, args.out, devices, model=args.model)


def consensus_request(args: argparse.Namespace) -> ConsensusRequest:
    """The request of ``puaudit consensus scores | align | table4`` (the settings made in that order, as before)."""
    command = args.consensus_command
    if command == "table4":
        return ConsensusRequest(command)
    output = OutputRequest(args.out, tuple(getattr(args, "argv", [])), no_figures=getattr(args, "no_figures", False))
    if command == "align":
        config = AlignConfig(**options_from_args(args, AlignConfig, include=ALIGN_FIELDS))
        return ConsensusRequest(command, args.matrix, output, align=config, human=args.human)
    config = ScoresConfig(**options_from_args(args, ScoresConfig))
    bt = BTConfig(**options_from_args(args, BTConfig, include=BT_FIELDS))
    elo = EloConfig(**options_from_args(args, EloConfig, include=ELO_FIELDS, rename=ELO_RENAME),
                    anchor=bt.anchor, seed=config.seed)  # fmt: skip
    return ConsensusRequest(command, args.verdicts, output, scores=config, bt=bt, elo=elo)
