"""Every knob of one audit, with its default, in frozen dataclasses (the CLI is built from them).

:class:`AuditConfig` (the audit) and :class:`EmbedConfig` (its embeddings). This module imports no
numerical library, so the ``puaudit`` parser reads the fields without loading the audit; what the
methods need (the scorers, the rules, numpy) is imported when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from probes.encode_config import EncodeConfig  # light (no numerical library): the parser reads it
from puaudit_runtime.cache import cache_dir
from puaudit_runtime.checks import check_fraction, check_int

from .names import CERTIFY, EVIDENCE_KINDS, FEATURES, check_kinds

# Picked by the data. kNN scores (experiments/reproductions/puaudit_rules.py, README "Decision rules"):
# over MT-Bench and LLMFAO, random and prompt-grouped splits, kNN with the two-sided calibrated rule
# had the best mean gain among the pairs that never lost more than 0.3 points. The evidence rule
# (experiments/reproductions/judge_evidence.py, README "Judge-side evidence"): over six sets at 10 /
# 20 / 50 % labels it never lost (worst +0.0 points; two-sided: -2.9) and gained up to +19.9 where
# the judge errs by position. The paper's configuration is scorer="pot", rule="paper".
DEFAULT_SCORER, DEFAULT_RULE = "knn", "evidence"
PAPER_SCORER, PAPER_RULE = "pot", "paper"
#: What a human tie means for the guarantee (``AuditConfig.human_ties``): the first is the default.
HUMAN_TIES = ("exclude", "disagree")


@dataclass(frozen=True)
class AuditConfig:
    """Every knob of one audit (PUAudit defaults). ``scorer`` / ``rule`` are names or callables.

    Attributes:
        m: transported mass in (0, 1]; default: estimated as the judge-human agreement on a
            holdout of the labelled rows (PUAudit §5.1)
        eta: flip threshold on normalised scores (the paper rule flips where s / max s < eta)
        alpha1: denoising, share of positives kept by cosine of the winner to its centre (PUAudit §3.2)
        alpha2: denoising, share of those kept by cosine of z to the mean z (PUAudit §3.2)
        group_by: score each question type against its own P' (question_type) or one pooled group
        scorer: scorer name (puaudit_jax.audit.scorers) or callable
        scorer_options: keyword options of the scorer, as a dict or sorted (key, value) pairs
        rule: decision rule name (puaudit_jax.audit.rules), a CalibratedRule or a callable
        rule_options: fields of a calibrated rule to replace, e.g. {"threshold": 0.6}
        crossfit_features: cross-fitted features to compute besides the rule's ("score", "two-sided")
        folds: cross-fitting folds of the labelled rows (calibrated rules)
        cluster_by: column grouping rows that share texts (e.g. prompt): cross-fitting folds and
            bootstrap resamples keep its groups whole
        holdout: share of labelled rows held out to estimate m
        m_clip: (low, high) range the estimated m is clipped to
        min_group_size: question types with fewer positives are denoised in one pooled group
        seed: seed of the holdout and the cross-fitting folds (numpy Generator)
        evidence: the kinds of evidence the evidence rule may weigh (embedding: the PU score; style,
            swapped, confidence, others: the judge's own tells); those the data lack are left out
        other_judges: columns holding other judges' verdicts on the same pairs (A | B | tie | missing)
        guarantee: agreement A in (0, 1) to guarantee: each pool verdict is trusted, flipped or escalated
            to a human so that the trusted and flipped ones agree with humans at least A of the time,
            with probability >= 1 - delta (labelled rows calibrate, see certify; needs a calibrated rule)
        delta: probability in (0, 1) that the guarantee fails
        cascade: with guarantee, rows the judge's verdict is not certified for go to the other judges in the
            order given (cheapest first), each audited on its own verdicts with the judges before it (never
            those after it) as evidence; a row no judge is certified for goes to a human; one guarantee for
            the whole output
        human_ties: with guarantee, what a human tie means for agreement. "exclude" (as Jung et al.): the
            guarantee covers the pool rows a human would pick a side on, and labelled ties do not calibrate;
            "disagree": every pool row, a human tie counting as disagreement (the final verdict picks a
            side), so labelled ties calibrate too: a stricter claim, less certified where humans often tie
        certify: with guarantee, the scores the pool is certified by. "label-free": the judge's agreement with
            its swapped order and the other judges, and its preference certainty, fitted on no label, so every
            labelled row tests it; "fitted": the audit's P(judge wrong), tested on the half of the labels hidden
            from the audit; "auto": both, each at half of delta, the one certifying more kept; "fitted-ppi" /
            "auto-ppi": the fitted score tested with prediction-powered p-values (asymptotic)
        spot_checks: with guarantee, the share of certified pool rows the label plan (plan.csv, to_label.csv)
            sends to humans at random besides the escalated ones, so that ``quantify --plan`` can weight every
            label by a known probability (0: a plan quantify refuses)
    """

    m: float | None = None
    eta: float = 0.5
    alpha1: float = 0.7
    alpha2: float = 0.7
    group_by: str | None = field(default="question_type", metadata={"choices": ("question_type",)})
    scorer: str | Callable = DEFAULT_SCORER
    scorer_options: tuple = ()
    rule: str | Callable = DEFAULT_RULE
    rule_options: tuple = ()
    crossfit_features: tuple = ()
    folds: int = 5
    cluster_by: str | None = None
    holdout: float = 0.25
    m_clip: tuple[float, float] = (0.05, 0.99)
    min_group_size: int = 5
    seed: int = 0
    evidence: tuple[str, ...] = field(default=EVIDENCE_KINDS, metadata={"choices": EVIDENCE_KINDS})
    other_judges: tuple[str, ...] = ()
    guarantee: float | None = None
    delta: float = 0.1
    cascade: bool = False
    human_ties: str = field(default="exclude", metadata={"choices": HUMAN_TIES})
    certify: str = field(default=next(iter(CERTIFY)), metadata={"choices": tuple(CERTIFY)})
    spot_checks: float = 0.1

    def __post_init__(self):
        for key in ("scorer_options", "rule_options"):
            if isinstance(getattr(self, key), dict):
                object.__setattr__(self, key, tuple(sorted(getattr(self, key).items())))
        object.__setattr__(self, "crossfit_features", tuple(self.crossfit_features))
        for key in ("evidence", "other_judges"):
            value = getattr(self, key)  # a comma list (as the command line writes it) or a sequence
            items = value.split(",") if isinstance(value, str) else value
            object.__setattr__(self, key, tuple(v.strip() for v in items if v.strip()))
        object.__setattr__(self, "m_clip", tuple(self.m_clip))

    def validate(self) -> None:
        """Raise ValueError naming the first field out of its range."""
        check_fraction("m", self.m, "(]", optional=True, what="the share of mass transported")
        check_fraction("eta", self.eta, "[]", what="a threshold on normalised scores")
        for name in ("alpha1", "alpha2"):
            check_fraction(name, getattr(self, name), "(]")
        check_fraction("holdout", self.holdout, "[)")
        if self.m is None and self.holdout == 0:
            raise ValueError("holdout must be > 0 when m is not given (m is estimated on the holdout); give m or a "
                             "holdout in (0, 1)")  # fmt: skip
        check_int("seed", self.seed, 0, "a numpy Generator seed")
        lo, hi = self.m_clip
        if not 0 < lo <= hi <= 1:
            raise ValueError(f"m_clip must satisfy 0 < low <= high <= 1, got {self.m_clip!r}")
        if self.group_by not in ("question_type", None):
            raise ValueError(f"group_by must be 'question_type' or None, got {self.group_by!r}")
        check_int("min_group_size", self.min_group_size, 1)
        self.make_scorer()
        self.decision_rule()
        unknown = set(self.crossfit_features) - set(FEATURES)
        if unknown:
            raise ValueError(f"crossfit_features must be among {FEATURES}, got {sorted(unknown)}")
        check_int("folds", self.folds, 2, "cross-fitting")
        check_kinds(self.evidence)
        if len(set(self.other_judges)) != len(self.other_judges) or not all(self.other_judges):
            raise ValueError(f"other_judges must be distinct column names, got {list(self.other_judges)}")
        self._validate_guarantee()

    def check_evidence_is_read(self) -> None:
        """Raise ValueError where evidence is asked for that the rule would accept and ignore.

        Asked for: ``evidence`` changed from its default, or ``other_judges`` without a cascade. Not part
        of :meth:`validate`: the evaluation protocol runs several rules on one audit, the first of which
        need not read the evidence the others do.
        """
        from .rules import rule_name

        reads_evidence = bool(getattr(self.decision_rule(), "evidence", ()))
        if tuple(self.evidence) != EVIDENCE_KINDS and not reads_evidence:
            raise ValueError(f"evidence {list(self.evidence)} is read by the evidence rule only; rule "
                             f"{rule_name(self.rule)!r} reads none and would ignore it: use "
                             "rule='evidence'")  # fmt: skip
        if self.other_judges and not self.cascade and not reads_evidence:
            raise ValueError(f"other_judges is evidence for the evidence rule (or a cascade); rule "
                             f"{rule_name(self.rule)!r} reads no evidence and would ignore "
                             f"{list(self.other_judges)}: use rule='evidence', or add cascade")  # fmt: skip

    def _validate_guarantee(self) -> None:
        """Raise ValueError for a guarantee or delta outside (0, 1), or a rule that gives no P(judge wrong)."""
        from .rules import needs_crossfit, rule_name

        for name in ("guarantee", "delta"):
            check_fraction(name, getattr(self, name), optional=True)
        if self.guarantee is None and self.delta != AuditConfig.delta:
            raise ValueError(f"delta {self.delta:g} is the guarantee's failure probability: it needs a guarantee "
                             "(--guarantee A)")  # fmt: skip
        if self.human_ties not in HUMAN_TIES:
            raise ValueError(f"human_ties must be one of {', '.join(HUMAN_TIES)}, got {self.human_ties!r}")
        if self.certify not in CERTIFY:
            raise ValueError(f"certify must be one of {', '.join(CERTIFY)}, got {self.certify!r}")
        check_fraction("spot_checks", self.spot_checks, "[]", what="a share of the certified rows")
        if self.guarantee is None and self.spot_checks != AuditConfig.spot_checks:
            raise ValueError("spot_checks is a share of the rows the guarantee certifies: it needs a guarantee "
                             "(--guarantee A)")  # fmt: skip
        if self.guarantee is None and self.certify != AuditConfig.certify:
            raise ValueError("certify says what the guarantee certifies by: it needs a guarantee (--guarantee A)")
        if self.guarantee is None and self.human_ties != AuditConfig.human_ties:
            raise ValueError("human_ties says what a human tie means for the guarantee: it needs a guarantee "
                             "(--guarantee A)")  # fmt: skip
        if self.cascade and (self.guarantee is None or not self.other_judges):
            raise ValueError("cascade needs a guarantee (--guarantee A) and the judges to cascade to "
                             "(--other-judges, cheapest first)")  # fmt: skip
        if self.guarantee is not None and not needs_crossfit(self.decision_rule()):
            raise ValueError(f"guarantee needs a calibrated rule (it certifies by P(judge wrong)); rule "
                             f"{rule_name(self.rule)!r} gives none: use a calibrated rule (evidence, calibrated, "
                             "calibrated-platt, two-sided, two-sided-platt)")  # fmt: skip

    def make_scorer(self):
        """The scorer ``scorer`` names, with ``scorer_options`` (:func:`~puaudit_jax.audit.scorers.get_scorer`)."""
        from .scorers import get_scorer

        return get_scorer(self.scorer, **dict(self.scorer_options))

    def decision_rule(self):
        """The rule ``rule`` names, with ``rule_options`` (:func:`~puaudit_jax.audit.rules.get_rule`)."""
        from .rules import get_rule

        return get_rule(self.rule, **dict(self.rule_options))

    def to_dict(self) -> dict:
        """JSON-able form (scorer and rule by name)."""
        from .rules import rule_name
        from .scorers import scorer_name

        out = asdict(self)
        out["scorer"], out["rule"] = scorer_name(self.scorer), rule_name(self.rule)
        out["scorer_options"] = {k: v for k, v in self.scorer_options}
        out["rule_options"] = {k: v for k, v in self.rule_options}
        out["crossfit_features"] = list(self.crossfit_features)
        out["evidence"], out["other_judges"] = list(self.evidence), list(self.other_judges)
        out["m_clip"] = list(self.m_clip)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> AuditConfig:
        """Inverse of :meth:`to_dict` (scorer and rule come back as names)."""
        return cls(**{**data, "m_clip": tuple(data["m_clip"]), "crossfit_features": tuple(data["crossfit_features"])})


MINILM_MAX_LENGTH = 256
"""MiniLM's input length in the audit (sentence-transformers' max_seq_length), with the middle-out cut."""
ENCODE_OPTIONS = {
    "batch_size": "inputs per encoder batch",
    "max_length": f"encoder input cap in tokens (default: {MINILM_MAX_LENGTH} for minilm with middle_out, else the "
    "model window)",
    "long_inputs": "policy above --max-length (default: middle_out for minilm and decoders; chunk for other encoders)",
}
"""The settings of :attr:`EmbedConfig.encoding` that the command line sets (``--batch-size``, ``--max-length``,
``--long-inputs``) and :func:`~puaudit_jax.audit.embed.probes_encoder` takes as keywords, with their help texts
for the audit; their defaults are ``EncodeConfig``'s."""


@dataclass(frozen=True)
class EmbedConfig:
    """How the audit's embeddings are obtained: a file, or a probes encoder with its disk cache.

    The one set of defaults for the command line (its options are generated from these fields and
    from those of ``encoding`` named in :data:`ENCODE_OPTIONS`) and the Python API
    (:func:`~puaudit_jax.audit.embed.probes_encoder`, :func:`~puaudit_jax.audit.embed.table_embeddings`):
    called with defaults, both encode the same way and share the disk cache.

    Attributes:
        encoder: minilm (default), smollm2 or a local model folder
        cache_dir: embedding cache folder (default $PUAUDIT_CACHE/embeddings or ~/.cache/puaudit/embeddings)
        no_cache: do not use the embedding disk cache
        encoding: the extraction settings the encoder runs (``probes.encode_config.EncodeConfig``: batch
            size, input cap, long-input policy, pooling...), each with probes' default; :meth:`resolved`
            gives MiniLM its own input length. ``layers`` must be one int: one vector per input.
    """

    encoder: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    encoding: EncodeConfig = field(default_factory=EncodeConfig)

    def validate(self) -> None:
        """ValueError naming settings the audit cannot use, or a cache folder that is a file.

        ``encoding`` must be an ``EncodeConfig`` (checked when it was made) whose ``layers`` is one int.
        The cache folder (``cache_dir``, else :func:`default_cache_dir`; unused with ``no_cache``) may
        not exist yet, but neither it nor a folder above it may be a file.
        """
        if not isinstance(self.encoding, EncodeConfig):
            raise ValueError(f"encoding must be a probes EncodeConfig, not {type(self.encoding).__name__}")
        if not isinstance(self.encoding.layers, int):
            raise ValueError(f"encoding.layers={self.encoding.layers}: the audit needs one vector per input, one layer")
        if not self.no_cache:
            _check_cache_folder(Path(self.cache_dir) if self.cache_dir else default_cache_dir())

    def resolved(self) -> EmbedConfig:
        """The settings actually used (the encoder named, MiniLM's own input length and cut).

        MiniLM gets its own input length (sentence-transformers' max_seq_length,
        :data:`MINILM_MAX_LENGTH`) with probes' middle-out cut -- the prompt's head and the end of the
        judged answer -- instead of chunked 512-token windows: ~4x less compute, the same audit numbers
        on MT-Bench (README).
        """
        name, encoding = self.encoder or "minilm", self.encoding
        if name == "minilm" and encoding.max_length is None and encoding.long_inputs is None:
            encoding = replace(encoding, max_length=MINILM_MAX_LENGTH, long_inputs="middle_out")
        return replace(self, encoder=name, encoding=encoding)

    def encode_config(self, progress: bool = False) -> EncodeConfig:
        """The ``EncodeConfig`` of the resolved settings (what the encoder runs and the cache keys).

        Args:
            progress: show the encoder's progress bar.
        """
        return replace(self.resolved().encoding, progress=progress)


def _check_cache_folder(folder: Path) -> None:
    """ValueError naming ``folder`` when it, or the nearest existing folder above it, is a file."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "" if existing == folder else f" ({existing} is a file)"
        raise ValueError(f"cache_dir {folder}: not a folder{where}; name a folder for the embedding cache, or no_cache")


def default_cache_dir() -> Path:
    """``$PUAUDIT_CACHE/embeddings`` (default ``~/.cache/puaudit/embeddings``; :mod:`puaudit_runtime.cache`)."""
    return cache_dir("embeddings")
