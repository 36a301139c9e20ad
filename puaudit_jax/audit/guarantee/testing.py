"""Which thresholds on a confidence score certify agreement >= A: exact binomial tests in a fallback sequence.

A candidate ranks the pool's final verdicts by a confidence q (larger = more likely right). Its
hypotheses are thresholds t_1 > t_2 > ... taken from the pool's quantiles (the grid never reads a
label), strictest first. At t, the n calibration rows with q >= t make e errors, and the null

    H_t: the agreement of the rows with q >= t is below A

has the exact binomial p-value P(Binomial(n, 1 - A) <= e) (Learn then Test, Angelopoulos, Bates,
Candès, Jordan & Lei 2021, §4; Trust or Escalate, Jung, Brahman & Choi, ICLR 2025, §3).

**The fallback procedure** (Wiens 2003, "A fixed sequence Bonferroni procedure for testing multiple
endpoints"; Wiens & Dmitrienko 2005). Each hypothesis H_i carries a share alpha_i of the level (most
carry none); H_i is tested at alpha_i plus the level of H_{i-1} when H_{i-1} was rejected, so a run of
rejections passes its level on and a failure loses only what it carried. The family-wise error is at
most sum alpha_i whatever the dependence between the tests. All of the level on the strictest testable
threshold is Jung et al.'s single fixed sequence: it stops at its first unlucky threshold, and where the
score ranks verdicts weakly (a strong judge) it certifies little though the whole pool clears A. Shares on
the strictest testable threshold and on the whole pool (:data:`WEIGHTS`) keep both chances, and every test
runs at a level at least that of Bonferroni over the same starts (what this module did before).

Testable: a share placed at pool coverage c lands on the first threshold at or past c where the
calibration rows expected above it (coverage x n) reach ``START`` x n_min (all of them when fewer, never
fewer than n_min), n_min = ceil(log level / log A) being the fewest rows that can reject at that level.

    binomial_curve(q_cal, correct, q_pool, A) -> Curve           (grid, coverage, n, e, p)
    place(curve, n_cal, A, level, weights) -> (m,) shares        alpha_i, summing to level
    select(q_cal, correct, q_pool, A, level, weights) -> Selection
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import bdtr, betaincinv  # binom.cdf and beta.ppf without scipy.stats' 0.6 s import

from ..names import ONE_SEQUENCE, STRICTEST_AND_WHOLE  # noqa: F401  (ONE_SEQUENCE: re-exported)

GRID = 200  # thresholds: pool quantiles at coverages 1/GRID, 2/GRID, ..., 1
START = 2  # a share lands where the calibration rows expected above it reach START x n_min
#: Where a candidate's level goes, as (where, share): "strictest" is the strictest testable threshold, a number
#: the first testable threshold whose pool coverage reaches it (1.0: the whole pool). The default of a candidate
#: built alone; ``AuditConfig.certify`` sets each candidate's own (:data:`~puaudit_jax.audit.names.CERTIFY`).
WEIGHTS = STRICTEST_AND_WHOLE


class CurveRow(NamedTuple):
    """One threshold of a candidate's grid, as tested.

    Attributes:
        threshold: the threshold t on the confidence q (rows with q >= t are selected).
        coverage: share of the pool with q >= t.
        n: calibration rows with q >= t.
        errors: their final verdicts that disagree with the human one.
        lower: one-sided Clopper-Pearson lower bound of their agreement at the level tested (at the
            candidate's level where untested).
        p_value: the p-value of H_t (agreement below A).
        level: the level H_t was tested at (0: not tested).
        rejected: whether H_t was rejected (t certified).
    """

    threshold: float
    coverage: float
    n: int
    errors: int
    lower: float
    p_value: float
    level: float
    rejected: bool

    @property
    def agreement(self) -> float:
        """The calibration rows' agreement above the threshold (NaN without any)."""
        return (self.n - self.errors) / self.n if self.n else float("nan")


@dataclass(frozen=True)
class Curve:
    """A candidate's grid of thresholds, strictest first, with what the calibration rows say at each.

    Attributes:
        grid: (m,) thresholds t_1 > ... > t_m.
        coverage: (m,) share of the pool with q >= t.
        n: (m,) calibration rows with q >= t.
        errors: (m,) their errors.
        p_value: (m,) p-value of each H_t.
    """

    grid: np.ndarray
    coverage: np.ndarray
    n: np.ndarray
    errors: np.ndarray
    p_value: np.ndarray


@dataclass(frozen=True)
class Selection:
    """A candidate's tested curve and the threshold it certifies.

    Attributes:
        threshold: the loosest rejected threshold (rows with q >= it are certified), or None.
        curve: one :class:`CurveRow` per grid threshold, strictest first.
        level: the level the candidate was given (its shares sum to it).
    """

    threshold: float | None
    curve: tuple[CurveRow, ...]
    level: float = 0.0

    @property
    def row(self) -> CurveRow | None:
        """The curve's row of the kept threshold, or None."""
        return None if self.threshold is None else next(r for r in self.curve if r.threshold == self.threshold)

    @property
    def coverage(self) -> float:
        """The share of the pool certified (0 when nothing is)."""
        row = self.row
        return 0.0 if row is None else row.coverage


def min_rows(agreement: float, delta: float) -> int:
    """Fewest calibration rows that can certify ``agreement`` at level ``delta`` (all of them agreeing)."""
    return math.ceil(math.log(delta) / math.log(agreement))


def confidence(p_wrong: np.ndarray) -> np.ndarray:
    """(n,) q = max(p, 1 - p), the probability that the final verdict is right; -inf where p is NaN."""
    p = np.asarray(p_wrong, float)
    return np.where(np.isfinite(p), np.maximum(p, 1.0 - p), -np.inf)


def thresholds(q_pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(grid (m,), coverage (m,)): the pool's quantile thresholds, strictest first, and the share above each.

    Args:
        q_pool: (n_U,) the pool's confidences (-inf: never selected).
    """
    q_pool = np.asarray(q_pool, float)
    finite = q_pool[np.isfinite(q_pool)]
    if len(finite) == 0:
        return np.zeros(0), np.zeros(0)
    grid = np.unique(np.quantile(finite, 1.0 - np.arange(1, GRID + 1) / GRID, method="higher"))[::-1]
    return grid, 1.0 - np.searchsorted(np.sort(q_pool), grid, side="left") / len(q_pool)


def counts_above(q_cal: np.ndarray, correct: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n (m,), errors (m,)): calibration rows with q >= t, and their errors, at each threshold of ``grid``.

    Args:
        q_cal: the calibration rows' confidences, shape (k,).
        correct: whether each calibration row's final verdict agrees with the human's, shape (k,) bool.
        grid: the thresholds, shape (m,).
    """
    q_cal, correct = np.asarray(q_cal, float), np.asarray(correct, bool)
    order = np.argsort(-q_cal, kind="stable")
    n = np.searchsorted(-q_cal[order], -grid, side="right")
    return n, np.concatenate([[0], np.cumsum(~correct[order])])[n]


def binomial_curve(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float,
                   grid: tuple[np.ndarray, np.ndarray] | None = None) -> Curve:  # fmt: skip
    """The :class:`Curve` with exact binomial p-values (module docstring).

    Args:
        q_cal: (n_cal,) confidence of the calibration rows' final verdicts (-inf: never selected).
        correct: (n_cal,) bool, the final verdict agrees with the human one.
        q_pool: (n_U,) confidence of the pool rows (the grid is theirs).
        agreement: A in (0, 1).
        grid: :func:`thresholds` of ``q_pool`` when already computed (a simulation reuses it), or None.
    """
    grid, coverage = thresholds(q_pool) if grid is None else grid
    n, e = counts_above(q_cal, correct, grid)
    return Curve(grid, coverage, n, e, np.where(n > 0, bdtr(e, n, 1.0 - agreement), 1.0))


def place(curve: Curve, n_cal: int, agreement: float, level: float, weights=WEIGHTS) -> np.ndarray:
    """(m,) the share alpha_i of ``level`` each threshold carries (module docstring, "Testable").

    Args:
        curve: the candidate's :class:`Curve`.
        n_cal: its calibration rows.
        agreement: A in (0, 1).
        level: the candidate's level.
        weights: (where, share) pairs; shares that land on no testable threshold are lost.
    """
    alpha = np.zeros(len(curve.grid))
    for where, share in weights:
        need = min_rows(agreement, share * level)
        enough = curve.coverage * n_cal >= max(need, min(START * need, n_cal))
        if where != "strictest":
            enough &= curve.coverage >= float(where) - 1e-12
        at = np.flatnonzero(enough)
        if len(at):
            alpha[at[0]] += share * level
    return alpha


def fallback(p_value: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rejected (m,), level tested (m,)) of the fallback procedure over hypotheses in order (module docstring).

    Args:
        p_value: (m,) p-values, in testing order.
        alpha: (m,) each hypothesis's own share of the level.
    """
    rejected, tested = np.zeros(len(alpha), bool), np.zeros(len(alpha))
    carry = 0.0
    for i, (p, a) in enumerate(zip(p_value, alpha)):
        tested[i] = carry + a
        rejected[i] = tested[i] > 0 and p <= tested[i]
        carry = tested[i] if rejected[i] else 0.0
    return rejected, tested


def select_on(curve: Curve, n_cal: int, agreement: float, level: float, weights=WEIGHTS) -> Selection:
    """The :class:`Selection` of a curve: its shares placed, the fallback run, the loosest rejection kept.

    Args:
        curve: the candidate's :class:`Curve`.
        n_cal: its calibration rows.
        agreement: A in (0, 1).
        level: the candidate's level.
        weights: (where, share) pairs, as :func:`place`.

    Returns:
        The :class:`Selection`: per threshold its Clopper-Pearson lower bound on the agreement at the level
        it was tested at, and the loosest rejected threshold (None if none).
    """
    rejected, tested = fallback(curve.p_value, place(curve, n_cal, agreement, level, weights))
    at = np.where(tested > 0, tested, level)
    ok = curve.n - curve.errors
    lower = np.where(ok > 0, betaincinv(np.maximum(ok, 1), curve.errors + 1, at), 0.0)  # Clopper-Pearson
    rows = tuple(CurveRow(*r) for r in zip(curve.grid.tolist(), curve.coverage.tolist(), curve.n.tolist(),
                                           curve.errors.tolist(), lower.tolist(), curve.p_value.tolist(),
                                           tested.tolist(), rejected.tolist()))  # fmt: skip
    kept = np.flatnonzero(rejected)
    return Selection(float(curve.grid[kept[-1]]) if len(kept) else None, rows, level)


def select(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float, delta: float,
           weights=WEIGHTS) -> Selection:  # fmt: skip
    """Thresholds on the confidence q tested in a fallback sequence at level ``delta`` (module docstring).

    Args:
        q_cal: (n_cal,) confidence of the calibration rows' final verdicts (-inf: never selected).
        correct: (n_cal,) bool, the final verdict agrees with the human one.
        q_pool: (n_U,) confidence of the pool rows (the grid of thresholds is theirs).
        agreement: A in (0, 1), the agreement to guarantee.
        delta: D in (0, 1), the probability the guarantee may fail.
        weights: (where, share) pairs (:data:`WEIGHTS`; (("strictest", 1.0),) is Jung et al.'s Alg. 1).

    Returns:
        The :class:`Selection`.
    """
    curve = binomial_curve(q_cal, correct, q_pool, agreement)
    return select_on(curve, len(np.asarray(q_cal)), agreement, delta, weights)


def plug_in(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float) -> float | None:
    """The naive threshold: the loosest grid threshold whose calibration agreement is >= A (no correction).

    A baseline for comparisons only: it ignores sampling error, so its guarantee fails about half the time
    where the agreement curve crosses A (``tests/audit/test_guarantee.py`` shows it).

    Args:
        q_cal: the calibration rows' confidences, shape (k,).
        correct: whether each calibration row's final verdict agrees with the human's, shape (k,) bool.
        q_pool: the pool rows' confidences, shape (n_pool,) (they make the grid).
        agreement: A in (0, 1).

    Returns:
        The threshold, or None when no threshold with calibration rows reaches A.
    """
    curve = binomial_curve(q_cal, correct, q_pool, agreement)
    ok = (curve.n > 0) & (curve.n - curve.errors >= agreement * curve.n)
    return float(curve.grid[ok].min()) if ok.any() else None
