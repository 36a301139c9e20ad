"""The PUAudit pipeline (PUAudit §3, Appendix A.4, Algorithm 1) as a chain of named stages.

    prepare -> estimate_m -> orient -> references -> score -> [crossfit] -> decide -> report
    with ``guarantee``: half the labels hidden -> the chain above -> certify (trust / flip / escalate),
    in :mod:`.guaranteed`; with ``cascade`` the chain runs again on each other judge's verdicts

Each stage is a function of frozen dataclasses in its own module of this package; :func:`run_audit`
only chains them and times them. The result is an :class:`AuditResult`: ``items`` (one row per
input row, input order: id, question_type, group, judge, human, status, reason, role, score_raw,
score, adjusted, flipped, p_wrong, p_wrong_lo, p_wrong_hi; with a guarantee also ``decision``, and role
"calibration" on the labelled rows that calibrated it) and an :class:`AuditReport`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..quantify.sample_check import audit_sample_checks
from ..quantify.targets import audit_agreement
from .config import AuditConfig
from .crossfit import crossfit, with_evidence
from .decide import apply_rule
from .embed import Encoder, PairEmbeddings
from .evidence import JUDGE_SIDE, judge_evidence
from .guaranteed import audit_with_guarantee
from .mass import MassEstimate, estimate_m
from .orient import Oriented, orient
from .prepare import AuditData, prepare
from .references import References, references
from .report import AuditReport, Counts
from .rules import CrossFit, needs_crossfit, rule_name
from .score import Scores, score
from .scorers import scorer_name

ROLES = ("P", "P-filtered", "holdout", "U", "excluded", "calibration")
ITEM_COLUMNS = (
    "id",
    "question_type",
    "group",
    "judge",
    "human",
    "status",
    "reason",
    "role",
    "score_raw",
    "score",
    "adjusted",
    "flipped",
    "p_wrong",
    "p_wrong_lo",
    "p_wrong_hi",
    "p_wrong_cross",
)


@dataclass(frozen=True)
class AuditResult:
    """The result of one audit: its item table, its report and what figures and other rules need.

    Attributes:
        items: one row per input comparison (columns :data:`ITEM_COLUMNS`).
        report: the :class:`AuditReport`.
        config: the settings.
        u_z: (n_U, d) float32 unit difference vectors of the pool in ``items[items.role == "U"]`` order
            (for figures).
        crossfit: the cross-fitted features when computed (other calibrated rules can be applied to them).
    """

    items: pd.DataFrame
    report: AuditReport
    config: AuditConfig
    u_z: np.ndarray = field(repr=False, default=None)
    crossfit: CrossFit | None = field(repr=False, default=None)

    @property
    def pool(self) -> pd.DataFrame:
        """The audited rows (role U)."""
        return self.items[self.items["role"] == "U"]


def roles(data: AuditData, mass: MassEstimate, oriented: Oriented, refs: References) -> np.ndarray:
    """The (n,) role of every row, one of :data:`ROLES`.

    P (kept in P'), P-filtered (a positive denoising dropped), holdout (measured m), U (audited) or
    excluded.

    Args:
        data: the prepared audit data.
        mass: the mass estimate (its held-out rows).
        oriented: the oriented vectors (positives and pool rows).
        refs: the references (the kept positives).

    Returns:
        (n,) object array of role names.
    """
    role = np.array(["excluded"] * data.n, dtype=object)
    role[oriented.positives] = "P-filtered"
    role[refs.kept] = "P"
    role[mass.held] = "holdout"
    role[oriented.unlabelled] = "U"
    return role


def items_table(data: AuditData, role: np.ndarray, scores: Scores) -> pd.DataFrame:
    """The per-row output before any decision: verdicts unchanged, no flips, P(judge wrong) NaN.

    Args:
        data: the prepared audit data.
        role: (n,) role of every row (:func:`roles`).
        scores: the pool's scores.

    Returns:
        A frame of n rows with the columns :data:`ITEM_COLUMNS`.
    """
    nan = np.full(data.n, np.nan)
    return pd.DataFrame(
        {
            "id": data.ids,
            "question_type": data.table["question_type"].to_numpy(dtype=object),
            "group": scores.group,
            "judge": data.judge,
            "human": data.human,
            "status": data.status,
            "reason": data.reason,
            "role": role,
            "score_raw": scores.score_raw,
            "score": scores.score,
            "adjusted": data.judge.copy(),
            "flipped": np.zeros(data.n, bool),
            "p_wrong": nan,
            "p_wrong_lo": nan.copy(),
            "p_wrong_hi": nan.copy(),
            "p_wrong_cross": nan.copy(),
        }
    )


def crossfit_kinds(config: AuditConfig) -> tuple[str, ...]:
    """The cross-fitted features to compute: those asked for and the rule's (sorted)."""
    rule = config.decision_rule()
    return tuple(sorted(set(config.crossfit_features) | ({rule.feature} if needs_crossfit(rule) else set())))


class _Clock:
    """Seconds per stage, in call order."""

    def __init__(self):
        self.t0 = self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self.last
        self.last = now


def run_audit(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, config: AuditConfig) -> AuditResult:
    """Audit the judge verdicts of the unlabelled rows of ``comparisons`` (see the module docstring).

    Args:
        comparisons: the comparison table, one row per comparison (columns ``id``, ``question_type``,
            ``judge``, ``human`` and the texts).
        features: :class:`PairEmbeddings` of the usable rows, or an encoder called on their inputs.
        config: the audit's settings.

    Returns:
        The :class:`AuditResult`.

    Raises:
        ValueError: a setting out of its range, or bad input (see :func:`prepare`); with ``guarantee``, too
            few labelled rows or a P(judge wrong) that ties every row.
    """
    config.validate()
    if config.guarantee is not None:
        return audit_with_guarantee(comparisons, features, config, audit=_audit)
    return _audit(comparisons, features, config)


def _audit(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, config: AuditConfig) -> AuditResult:
    """The chain of stages of :func:`run_audit`, on a validated config."""
    clock = _Clock()
    data = prepare(comparisons, features, config)
    clock.lap("prepare")
    mass = estimate_m(data, config)
    oriented = orient(data, mass)
    refs = references(oriented.positives, data.types, oriented.e_winner, oriented.z, config)
    clock.lap("denoise")
    scores = score(data, oriented, refs, mass.value, config)
    clock.lap("score")
    clock.seconds["solver"] = scores.solver_s
    kinds = crossfit_kinds(config)
    cf, cf_summary = crossfit(data, oriented, mass, kinds, config) if kinds else (None, None)
    if kinds:
        judge_side = [k for k in config.evidence if k in JUDGE_SIDE]
        evidence = judge_evidence(data.table, judge_side, config.other_judges)
        cf = with_evidence(cf, evidence, data.labelled, oriented.unlabelled, config.evidence)
        clock.lap("crossfit")
    role = roles(data, mass, oriented, refs)
    items, decision = apply_rule(
        items_table(data, role, scores),
        config.decision_rule(),
        crossfit=cf,
        m=mass.value,
        eta=config.eta,
        seed=config.seed,
    )
    report = audit_report(data, mass, refs, scores, items, decision, cf_summary, config, clock)
    return AuditResult(
        items=items, report=report, config=config, u_z=oriented.z[role == "U"].astype(np.float32), crossfit=cf
    )


def audit_report(data, mass, refs, scores, items, decision, cf_summary, config, clock: _Clock) -> AuditReport:
    """Stage 8: the :class:`AuditReport` of a decided audit.

    Args:
        data: the prepared data (:func:`.prepare.prepare`).
        mass: the mass estimate (:func:`.mass.estimate_m`).
        refs: the references (:func:`.references.references`).
        scores: the scores (:func:`.score.score`).
        items: the decided item table (:func:`.decide.apply_rule`).
        decision: the calibrated rule's decision summary, or None.
        cf_summary: the cross-fit's summary, or None.
        config: the audit's settings.
        clock: the stage timer (its total is taken here).
    """
    flipped, group = items["flipped"].to_numpy(bool), items["group"].to_numpy()
    groups = tuple(replace(g, n_flipped=int(flipped[group == g.group].sum())) for g in scores.groups)
    clock.seconds["total"] = time.perf_counter() - clock.t0
    return AuditReport(
        counts=Counts.of(data.status, data.reason, items["role"].to_numpy(), flipped),
        flip_rate=float(flipped[items["role"].to_numpy() == "U"].mean()),
        m=mass,
        config=config,
        scorer=scorer_name(config.scorer),
        rule=rule_name(config.decision_rule()),
        embeddings={"source": data.source, "dim": data.dim, **({"encoding": data.encoding} if data.encoding else {})},
        denoising=refs.groups,
        groups=groups,
        decision=decision,
        crossfit=cf_summary,
        timings_s=dict(clock.seconds),
        agreement=audit_agreement(items),
        sample_checks=audit_sample_checks(data.types, data.status, data.table, config.cluster_by),
    )


def audit(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, **options) -> AuditResult:
    """:func:`run_audit` with the fields of :class:`AuditConfig` as keywords (``m=0.9, scorer="pot"``).

    Args:
        comparisons: the comparison table (as in :func:`run_audit`).
        features: :class:`PairEmbeddings` or an encoder.
        **options: fields of :class:`AuditConfig`.

    Returns:
        The :class:`AuditResult`.

    Raises:
        ValueError: a setting out of range, or evidence asked for that the rule would ignore
            (:meth:`AuditConfig.check_evidence_is_read`).
    """
    config = AuditConfig(**options)
    config.check_evidence_is_read()
    return run_audit(comparisons, features, config)
