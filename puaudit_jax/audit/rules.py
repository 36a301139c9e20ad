"""Decision rules: which judge verdicts of the unlabelled pool to flip.

Two kinds, pluggable like the scorers.

**Score rules** look at one scoring group's normalised scores only::

    rule(normalised_scores (k,), context: RuleContext) -> flips (k,) bool

``normalised_scores`` are s̄_j = s_j / max_k s_k in [0, 1] of one scoring group (PUAudit §3.3);
``RuleContext`` carries the audit's m, eta, the group name and the paper.

==========  ================================================================================
``paper``  the paper's rule (§3.3, Algorithm 1 lines 13-18): flip where s̄_j < eta
``budget``  flip the floor((1 - m) * k) lowest-scoring items (ties broken by position): the
            number of flips an exact POT solution implies, whatever the scorer; used to compare
            scorers at the same flip budget
``none``    flip nothing (the raw judge; a reference row)
==========  ================================================================================

**Calibrated rules** (:class:`CalibratedRule`) also use what the labelled comparisons
say about the judge: the audit scores every labelled comparison like a pool item, oriented by the
judge and against a reference P' built without its fold (:class:`CrossFit`), so each one is a
pair (feature, judge agreed with the human). The rule fits a monotone map feature -> P(judge
correct) on those pairs, flips a pool verdict only where P(judge wrong) > ``threshold`` and
abstains -- flips nothing -- unless the gain of doing so, measured out of fold on the labelled
pairs, is positive with bootstrap confidence ``confidence``. Per pool item it returns P(judge
wrong) with a bootstrap interval; for the run, the expected gain with its interval.

=====================  ======================================================================
``calibrated``         isotonic map of the scorer's normalised score (the one-sided feature)
``calibrated-platt``   logistic map with per-question-type offsets (ridge-shrunk)
``two-sided``          isotonic map of s̄(z_j) - s̄(-z_j): each item is scored in both
                       orientations against P' (one joint problem, m = 1/2 of the doubled
                       pool), so the feature says which orientation aligns better, by how much
``two-sided-platt``    the same feature, logistic map with type offsets
``evidence``           one logistic model of P(judge wrong) on the two-sided feature and the
                       judge-side evidence (:mod:`puaudit_jax.audit.evidence`: swapped-order
                       verdict, confidence, other judges, style), per-type offsets and slopes
=====================  ======================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from puaudit_runtime.checks import check_fraction

from .names import EVIDENCE_KINDS, FEATURES, RENAMED_RULES, check_kinds, current_rule

if TYPE_CHECKING:  # numpy is imported where a rule runs: the CLI's parser reads CalibratedRule's fields
    import numpy as np


@dataclass(frozen=True)
class RuleContext:
    """What a rule may look at besides the scores: m and eta of the audit, the group, the paper."""

    m: float
    eta: float
    group: str = "all"
    seed: int = 0


Rule = Callable[["np.ndarray", RuleContext], "np.ndarray"]


def paper_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    """Flip exactly where the normalised score is strictly below eta."""
    import numpy as np

    return np.asarray(scores) < ctx.eta


def budget_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    """Flip the floor((1 - m) k) lowest scores (stable order: earlier items first among ties)."""
    import numpy as np

    scores = np.asarray(scores)
    n_flip = int(np.floor((1.0 - ctx.m) * len(scores) + 1e-9))
    flips = np.zeros(len(scores), bool)
    flips[np.argsort(scores, kind="stable")[:n_flip]] = True
    return flips


def no_flip_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    """Flip nothing (the raw judge; a reference row)."""
    import numpy as np

    return np.zeros(len(scores), bool)


@dataclass(frozen=True)
class CrossFit:
    """The audit's cross-fitted features (:func:`puaudit_jax.audit.run_audit` builds it).

    ``pool[kind]``: (n_U, K) feature of every pool item against each fold's reference P'_k
    (pool order = ``items[role == "U"]``); ``labelled[kind]``: (n_L,) feature of every labelled
    comparison against the reference of the folds it is not in (NaN where it could not be scored);
    ``correct`` (n_L,) judge == human; ``fold`` (n_L,) its fold; ``pool_group`` / ``labelled_group``
    question types (for per-type offsets); ``cluster`` (n_L,) or None: the bootstrap resamples whole
    clusters; ``labelled_ids`` (n_L,). Larger features = judge more likely correct.

    Judge-side evidence (:mod:`puaudit_jax.audit.evidence`), for rules that read it:
    ``evidence_pool`` (n_U, p) and ``evidence_labelled`` (n_L, p) features (None when not computed),
    ``evidence_names`` / ``evidence_kinds`` (p,), ``evidence_rows`` kind -> rows that have it,
    ``evidence_skipped`` kind -> why it is absent, ``enabled`` the kinds the audit may use
    (``AuditConfig.evidence``; "embedding" = the cross-fitted score itself).
    """

    pool: dict
    labelled: dict
    correct: np.ndarray
    fold: np.ndarray
    pool_group: np.ndarray
    labelled_group: np.ndarray
    labelled_ids: np.ndarray
    cluster: np.ndarray | None = None
    evidence_pool: np.ndarray | None = None
    evidence_labelled: np.ndarray | None = None
    evidence_names: tuple = ()
    evidence_kinds: tuple = ()
    evidence_rows: dict = field(default_factory=dict)
    evidence_skipped: dict = field(default_factory=dict)
    enabled: tuple = EVIDENCE_KINDS

    @property
    def n_folds(self) -> int:
        """Number of folds (0 without labelled items)."""
        return int(self.fold.max()) + 1 if len(self.fold) else 0


@dataclass(frozen=True)
class Evidence:
    """What the out-of-fold calibration measured (absent when the rule abstained for lack of data).

    Gains are in agreement points per item (+1 a wrong verdict fixed, -1 a right one broken):
    ``crossfit_*`` on the labelled items out of fold (gain, its ``1 - confidence`` bootstrap lower
    bound and central interval, flip rate and precision), ``expected_*`` on the pool from the
    calibrated P(judge wrong); ``interval`` coverage, ``n_boot`` resamples of ``bootstrap_unit``.
    """

    n_flipped_if_not_abstaining: int
    crossfit_gain: float
    crossfit_gain_lower_bound: float
    crossfit_gain_interval: tuple[float, float]
    crossfit_flip_rate: float
    crossfit_flip_precision: float | None
    expected_gain: float
    expected_gain_interval: tuple[float, float]
    interval: float
    n_boot: int
    bootstrap_unit: str


@dataclass(frozen=True)
class DecisionSummary:
    """A calibrated rule's decision for the run: its settings, the calibration sizes, the flips.

    Attributes:
        rule: the rule's name.
        method: "isotonic", "platt" or "logistic".
        feature: "score" or "two-sided".
        threshold: flip where P(judge wrong) > threshold.
        confidence: the bootstrap confidence the out-of-fold gain needs.
        n_labelled: labelled items.
        n_calibration: labelled items scored (the calibration set).
        n_unscored_labelled: labelled items that could not be scored.
        folds: cross-fitting folds.
        judge_agreement_labelled: share of the calibration items where the judge agrees with the
            human (None without any).
        abstained: whether the rule abstained (flipped nothing).
        reason: why it abstained, or that the gain was above 0.
        n_flipped: pool verdicts flipped.
        evidence: the :class:`Evidence`, unless the rule abstained for lack of data.
        judge_evidence: for rules that read judge-side evidence: the features used, the rows that
            have each kind, the kinds left out and why, and the fitted weights (logit of P(judge
            correct) per standard deviation of each feature); None for the other rules.
    """

    rule: str
    method: str
    feature: str
    threshold: float
    confidence: float
    n_labelled: int
    n_calibration: int
    n_unscored_labelled: int
    folds: int
    judge_agreement_labelled: float | None
    abstained: bool
    reason: str
    n_flipped: int
    evidence: Evidence | None = None
    judge_evidence: dict | None = None

    def to_dict(self) -> dict:
        """Flat JSON-able form (the evidence's fields follow the summary's; no judge_evidence when None)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("evidence", "judge_evidence")}
        if self.judge_evidence is not None:
            out["judge_evidence"] = self.judge_evidence
        if self.evidence is not None:
            out.update({f.name: getattr(self.evidence, f.name) for f in fields(self.evidence)})
            for key in ("crossfit_gain_interval", "expected_gain_interval"):
                out[key] = list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> DecisionSummary:
        """Inverse of :meth:`to_dict` (the evidence when all its fields are present)."""
        names = {f.name for f in fields(Evidence)}
        evidence = None
        if names <= set(data):
            evidence = Evidence(**{k: tuple(data[k]) if k.endswith("_interval") else data[k] for k in names})
        return cls(**{k: v for k, v in data.items() if k not in names}, evidence=evidence)


@dataclass(frozen=True)
class Decision:
    """A calibrated rule's output. The flips use ``p_wrong``.

    Attributes:
        flips: (n_U,) bool pool flips.
        p_wrong: (n_U,) P(judge wrong) of the pool.
        p_wrong_lo: (n_U,) lower end of its bootstrap interval.
        p_wrong_hi: (n_U,) upper end of its bootstrap interval.
        labelled_p_wrong: (n_L,) out-of-fold P(judge wrong) of the labelled items.
        info: the run's :class:`DecisionSummary`.
        p_wrong_cross: (n_U,) the pool's P(judge wrong) by cross-prediction, the mean over folds k of
            the map fitted without fold k applied to the pool's fold-k feature -- the same function of
            the data that predicts a fold-k labelled item, so a prediction-powered estimate's rectifier
            sees no train/test shift (Zrnic & Candes, "Cross-prediction-powered inference", PNAS 2024).
    """

    flips: np.ndarray
    p_wrong: np.ndarray
    p_wrong_lo: np.ndarray
    p_wrong_hi: np.ndarray
    labelled_p_wrong: np.ndarray
    info: DecisionSummary
    p_wrong_cross: np.ndarray | None = None


@dataclass(frozen=True)
class _Calibration:
    """The labelled items a calibrated rule learns from.

    Features x, judge correct c (0/1), type groups, folds, clusters (or None), all (k,) over the scored
    labelled items; ``ok`` (n_L,) which labelled items were scored.
    """

    x: np.ndarray
    c: np.ndarray
    groups: np.ndarray
    fold: np.ndarray
    clusters: np.ndarray | None
    ok: np.ndarray


@dataclass(frozen=True)
class CalibratedRule:
    """Flip where calibrated P(judge wrong) > ``threshold``; abstain without evidence of a gain.

    - ``method``: "isotonic", "platt" or "logistic" (:mod:`puaudit_jax.audit.calibration`);
      ``feature``: "score" (one-sided) or "two-sided".
    - ``evidence``: the kinds of evidence the rule weighs (``EVIDENCE_KINDS`` of
      :mod:`puaudit_jax.audit.evidence`: "embedding" is ``feature``, the others the judge-side
      features of the cross-fit), as far as the audit enables them (``AuditConfig.evidence``) and the
      data have them; empty = ``feature`` alone. Needs method "logistic": one model of P(judge wrong)
      over all of them, with per-type offsets and slopes.
    - ``threshold``: 1/2 minimises expected disagreement; a cost ratio r = cost of breaking a correct
      verdict / cost of keeping a wrong one gives threshold r / (1 + r).
    - ``confidence``: abstain unless the (1 - confidence) bootstrap quantile of the out-of-fold gain
      on the labelled items is > 0. ``n_boot`` resamples (of clusters when the audit groups them);
      ``interval``: central coverage of the reported intervals. ``min_labelled``: fewer usable
      labelled items -> abstain.

    Attributes:
        threshold: calibrated rules: flip where P(judge wrong) > T (a cost ratio r of a broken correct
            verdict to a kept wrong one gives T = r / (1 + r))
        confidence: calibrated rules: abstain unless the out-of-fold gain is > 0 at this confidence
    """

    method: str = "isotonic"
    feature: str = "score"
    threshold: float = 0.5
    confidence: float = 0.9
    n_boot: int = 200
    interval: float = 0.9
    min_labelled: int = 20
    name: str = "calibrated"
    evidence: tuple = ()
    needs_crossfit: bool = field(default=True, init=False, repr=False)

    def __post_init__(self):
        if self.method not in ("isotonic", "platt", "logistic"):
            raise ValueError(f"method must be 'isotonic', 'platt' or 'logistic', got {self.method!r}")
        object.__setattr__(self, "evidence", check_kinds(self.evidence))
        if self.evidence and self.method != "logistic":
            raise ValueError(f"a rule that weighs evidence {self.evidence} needs method 'logistic'")
        if self.feature not in FEATURES:
            raise ValueError(f"feature must be one of {FEATURES}, got {self.feature!r}")
        for key in ("threshold", "confidence", "interval"):
            check_fraction(key, getattr(self, key))
        if self.n_boot < 1 or self.min_labelled < 2:
            raise ValueError("n_boot must be >= 1 and min_labelled >= 2")

    def _columns(self, cf: CrossFit) -> tuple[bool, np.ndarray]:
        """(whether ``feature`` enters, (p,) which judge-side evidence columns enter)."""
        import numpy as np

        if not self.evidence:
            return True, np.zeros(len(cf.evidence_names), bool)
        kinds = [k for k in self.evidence if k in cf.enabled]
        if cf.evidence_pool is None:
            return "embedding" in kinds, np.zeros(0, bool)
        return "embedding" in kinds, np.isin(np.asarray(cf.evidence_kinds, dtype=object), kinds)

    def _stack(self, cf: CrossFit, feature: np.ndarray, evidence: np.ndarray | None) -> np.ndarray:
        """The design: (k,) ``feature`` alone, or (k, q) of the feature and the evidence weighed."""
        import numpy as np

        if not self.evidence:
            return feature
        use_feature, mask = self._columns(cf)
        parts = ([feature[:, None]] if use_feature else []) + ([evidence[:, mask]] if mask.any() else [])
        return np.column_stack(parts) if parts else np.zeros((len(feature), 0))

    def _calibration(self, cf: CrossFit) -> _Calibration:
        import numpy as np

        x_lab = np.asarray(cf.labelled[self.feature], np.float64)  # (n_L,)
        ok = np.isfinite(x_lab) if self._columns(cf)[0] else np.ones(len(x_lab), bool)
        x = self._stack(cf, x_lab, cf.evidence_labelled)
        clusters = None if cf.cluster is None else np.asarray(cf.cluster, dtype=object)[ok]
        return _Calibration(
            x[ok],
            np.asarray(cf.correct, float)[ok],
            np.asarray(cf.labelled_group, dtype=object)[ok],
            np.asarray(cf.fold)[ok],
            clusters,
            ok,
        )

    def _fit(self, cf: CrossFit, cal: _Calibration, rows=slice(None)):
        """The calibration map fitted on the calibration items ``rows``.

        With evidence, only the style features get per-type slopes (how much a judge's taste for
        length or markdown misleads it depends on the kind of question); the others one slope each.
        """
        import numpy as np

        from .calibration import fit_map  # pandas and scipy: imported when a rule is fitted, not by the CLI's parser

        if not self.evidence:
            return fit_map(self.method, cal.x[rows], cal.c[rows], cal.groups[rows])
        use_feature, mask = self._columns(cf)
        kinds = (["embedding"] if use_feature else []) + list(np.asarray(cf.evidence_kinds, dtype=object)[mask])
        interact = np.asarray(kinds, dtype=object) == "style"
        return fit_map(self.method, cal.x[rows], cal.c[rows], cal.groups[rows], interact=interact)

    def _pool_x(self, cf: CrossFit, k: int) -> np.ndarray:
        """The pool's design with fold k's cross-fitted feature."""
        import numpy as np

        return self._stack(cf, np.asarray(cf.pool[self.feature], np.float64)[:, k], cf.evidence_pool)

    def _judge_evidence(self, cf: CrossFit, cal: _Calibration) -> dict | None:
        """The report's account of the evidence weighed (None for a rule that weighs none)."""
        import numpy as np

        if not self.evidence:
            return None
        use_feature, mask = self._columns(cf)
        names = (["embedding:" + self.feature] if use_feature else []) + [
            str(n) for n in np.asarray(cf.evidence_names, dtype=object)[mask]
        ]
        rows = {k: v for k, v in cf.evidence_rows.items() if k in self.evidence and k in cf.enabled}
        skipped = {k: v for k, v in cf.evidence_skipped.items() if k in self.evidence}
        skipped.update({k: "switched off" for k in self.evidence if k not in cf.enabled})
        out = {"features": names, "rows": rows, "skipped": skipped, "coefficients": None}
        if cal.x.ndim == 2 and cal.x.shape[1] and len(cal.c) >= self.min_labelled:
            from .calibration import LogisticMap

            fitted = self._fit(cf, cal)
            if isinstance(fitted, LogisticMap):
                out["coefficients"] = {n: float(w) for n, w in zip(names, fitted.w)}
        return out

    def _summary(self, cf: CrossFit, cal: _Calibration, **decision) -> DecisionSummary:
        return DecisionSummary(
            rule=self.name,
            method=self.method,
            feature=self.feature,
            threshold=self.threshold,
            confidence=self.confidence,
            n_labelled=int(len(cal.ok)),
            n_calibration=int(cal.ok.sum()),
            n_unscored_labelled=int((~cal.ok).sum()),
            folds=cf.n_folds,
            judge_agreement_labelled=float(cal.c.mean()) if len(cal.c) else None,
            **decision,
        )

    def _out_of_fold(self, cf: CrossFit, cal: _Calibration) -> np.ndarray:
        """(k,) P(judge wrong) of each scored labelled item from a map fitted on the other folds."""
        import numpy as np

        p_oof = np.empty(len(cal.x))
        for k in np.unique(cal.fold):
            test = cal.fold == k
            fitted = self._fit(cf, cal, ~test)
            p_oof[test] = 1.0 - fitted(cal.x[test], cal.groups[test])
        return p_oof

    def _pool_p_wrong(self, cf: CrossFit, cal: _Calibration, rows=None) -> np.ndarray:
        """(n_U,) P(judge wrong) of the pool, averaged over the folds' features.

        From a map fitted on the calibration items ``rows`` (all when None).
        """
        import numpy as np

        fitted = self._fit(cf, cal, slice(None) if rows is None else rows)
        groups, n_folds = np.asarray(cf.pool_group, dtype=object), np.asarray(cf.pool[self.feature]).shape[1]
        return np.mean([1.0 - fitted(self._pool_x(cf, k), groups) for k in range(n_folds)], axis=0)

    def _pool_cross(self, cf: CrossFit, cal: _Calibration) -> np.ndarray:
        """(n_U,) :attr:`Decision.p_wrong_cross`: mean over folds k of map_{-k}(pool feature k)."""
        import numpy as np

        groups = np.asarray(cf.pool_group, dtype=object)
        out = []
        for k in np.unique(cal.fold):
            fitted = self._fit(cf, cal, cal.fold != k)
            out.append(1.0 - fitted(self._pool_x(cf, k), groups))
        return np.mean(out, axis=0)

    def decide(self, cf: CrossFit, seed: int = 0) -> Decision:
        """Calibrate on ``cf``'s labelled items, decide on its pool (see the class docstring)."""
        import numpy as np

        rng = np.random.default_rng(seed)
        cal = self._calibration(cf)
        n_u = np.asarray(cf.pool[self.feature]).shape[0]
        nan, labelled_p = np.full(n_u, np.nan), np.full(len(cal.ok), np.nan)
        n_folds = len(np.unique(cal.fold))
        reason = None
        if len(cal.x) < self.min_labelled or n_folds < 2:
            reason = (
                f"too few labelled items to calibrate ({len(cal.x)} scored, {n_folds} folds; "
                f"need {self.min_labelled} and 2)"
            )
        elif cal.x.ndim == 2 and cal.x.shape[1] == 0:
            reason = "no evidence to weigh (every kind switched off or absent from the data)"
        if reason is not None:
            summary = self._summary(cf, cal, abstained=True, reason=reason, n_flipped=0,
                                    judge_evidence=self._judge_evidence(cf, cal))  # fmt: skip
            return Decision(np.zeros(n_u, bool), nan, nan, nan, labelled_p, summary)
        from .calibration import bootstrap_indices

        p_oof = self._out_of_fold(cf, cal)
        labelled_p[cal.ok] = p_oof
        flip_lab = p_oof > self.threshold
        gain_lab = flip_lab * (1.0 - 2.0 * cal.c)  # +1 a wrong verdict fixed, -1 a right one broken
        boots = bootstrap_indices(len(cal.x), cal.clusters, self.n_boot, rng)
        gain_boot = np.array([gain_lab[b].sum() / len(b) for b in boots])
        lcb = float(np.quantile(gain_boot, 1 - self.confidence))
        p = self._pool_p_wrong(cf, cal)
        p_boot = np.array([self._pool_p_wrong(cf, cal, b) for b in boots])  # (B, n_U)
        p_lo, p_hi = np.quantile(p_boot, [(1 - self.interval) / 2, 1 - (1 - self.interval) / 2], axis=0)
        abstained = not lcb > 0
        flips = (p > self.threshold) & (not abstained)
        reason = self._reason(abstained, flip_lab, gain_lab, lcb)
        evidence = self._evidence(p, p_boot, flips, flip_lab, gain_lab, gain_boot, lcb, cal)
        summary = self._summary(cf, cal, abstained=abstained, reason=reason, n_flipped=int(flips.sum()),
                                evidence=evidence, judge_evidence=self._judge_evidence(cf, cal))  # fmt: skip
        return Decision(flips, p, p_lo, p_hi, labelled_p, summary, self._pool_cross(cf, cal))

    def _reason(self, abstained: bool, flip_lab, gain_lab, lcb: float) -> str:
        if not abstained:
            return "out-of-fold gain above 0"
        if not flip_lab.any():
            return "no labelled item would be flipped"
        return (
            f"out-of-fold gain {gain_lab.mean():+.4f} not above 0 with confidence {self.confidence} "
            f"(lower bound {lcb:+.4f})"
        )

    def _evidence(self, p, p_boot, flips, flip_lab, gain_lab, gain_boot, lcb, cal: _Calibration) -> Evidence:
        """The measured gains with intervals (module docstring of :class:`Evidence`)."""
        import numpy as np

        quantiles = [(1 - self.interval) / 2, 1 - (1 - self.interval) / 2]
        expected_boot = (flips[None, :] * (2 * p_boot - 1)).mean(1)
        return Evidence(
            n_flipped_if_not_abstaining=int((p > self.threshold).sum()),
            crossfit_gain=float(gain_lab.mean()),
            crossfit_gain_lower_bound=lcb,
            crossfit_gain_interval=tuple(float(v) for v in np.quantile(gain_boot, quantiles)),
            crossfit_flip_rate=float(flip_lab.mean()),
            crossfit_flip_precision=float((1 - cal.c[flip_lab]).mean()) if flip_lab.any() else None,
            expected_gain=float((flips * (2 * p - 1)).mean()),
            expected_gain_interval=tuple(float(v) for v in np.quantile(expected_boot, quantiles)),
            interval=self.interval,
            n_boot=self.n_boot,
            bootstrap_unit="cluster" if cal.clusters is not None else "item",
        )


RULES: dict[str, Rule | CalibratedRule] = {
    "paper": paper_rule,
    "budget": budget_rule,
    "none": no_flip_rule,
    "calibrated": CalibratedRule(),
    "calibrated-platt": CalibratedRule(method="platt", name="calibrated-platt"),
    "two-sided": CalibratedRule(feature="two-sided", name="two-sided"),
    "two-sided-platt": CalibratedRule(method="platt", feature="two-sided", name="two-sided-platt"),
    "evidence": CalibratedRule(method="logistic", feature="two-sided", evidence=EVIDENCE_KINDS, name="evidence"),
}


def get_rule(rule, **options):
    """A rule by name, a :class:`CalibratedRule`, or a score-rule callable.

    ``options`` replace fields of a calibrated rule, e.g. threshold=0.6.
    """
    if isinstance(rule, str):
        rule = current_rule(rule)
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}; use one of {sorted(RULES)} or a callable")
        rule = RULES[rule]
    elif not callable(rule) and not isinstance(rule, CalibratedRule):
        raise ValueError(f"a rule is a name, a CalibratedRule or a callable, got {type(rule).__name__}")
    if options:
        if not isinstance(rule, CalibratedRule):
            raise ValueError(f"rule options {sorted(options)} only apply to calibrated rules")
        rule = replace(rule, **options)
    return rule


def needs_crossfit(rule) -> bool:
    """Whether ``rule`` (a name, a calibrated rule or a callable) needs the cross-fitted features."""
    return bool(getattr(get_rule(rule), "needs_crossfit", False))


def rule_feature(rule) -> str | None:
    """The cross-fitted feature ``rule`` reads ("score" or "two-sided"), None for score rules."""
    return getattr(get_rule(rule), "feature", None)


def rule_name(rule) -> str:
    """The registry name of a rule ("paper" for :func:`paper_rule`), else its ``name`` / ``__name__``."""
    if isinstance(rule, str):
        return RENAMED_RULES.get(rule, rule)
    for key, registered in RULES.items():
        if registered is rule:
            return key
    return getattr(rule, "name", getattr(rule, "__name__", "custom"))
