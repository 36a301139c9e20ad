"""Stage 7, ``decide``: which judge verdicts of the pool get flipped (PUAudit §3.3, Alg. 1 l. 17-18).

Score rules (the paper's: flip where s̄_j < eta) read each scoring group's normalised scores; a
group with a single pool item has s̄ = 1 and is never flipped by the paper rule. Calibrated rules
(:class:`~puaudit_jax.audit.rules.CalibratedRule`) read the cross-fitted features and also give
P(judge wrong) with a bootstrap interval, for the pool and (out of fold) the labelled rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..datasets.exclusions import LABELLED
from ..datasets.verdicts import flip_verdict
from .rules import CrossFit, DecisionSummary, RuleContext, get_rule, needs_crossfit, rule_name

P_WRONG = ("p_wrong", "p_wrong_lo", "p_wrong_hi", "p_wrong_cross")


def with_flips(items: pd.DataFrame, flips: np.ndarray) -> pd.DataFrame:
    """``items`` with ``flipped`` = flips and ``adjusted`` = the judge verdict flipped where flips.

    Args:
        items: the audit's item table (one row per comparison, a ``judge`` column).
        flips: (n,) bool, one per row of ``items``.

    Returns:
        A new frame with the columns ``flipped`` and ``adjusted`` set.
    """
    judge = items["judge"].to_numpy(dtype=object)
    return items.assign(flipped=np.asarray(flips, bool), adjusted=np.where(flips, flip_verdict(judge), judge))


def _calibrated(
    items: pd.DataFrame, rule, crossfit: CrossFit | None, pool: np.ndarray, seed: int
) -> tuple[np.ndarray, DecisionSummary]:
    """(pool flips, summary) of a calibrated rule; writes P(judge wrong) columns into ``items``."""
    if crossfit is None:
        raise ValueError(
            f"rule {rule_name(rule)!r} needs the audit's cross-fitted features: run the audit "
            f"with this rule or with crossfit_features=({rule.feature!r},)"
        )
    if rule.feature not in crossfit.pool:
        raise ValueError(
            f"the audit computed cross-fitted features {sorted(crossfit.pool)}; "
            f"rule {rule_name(rule)!r} needs {rule.feature!r}"
        )
    decision = rule.decide(crossfit, seed=seed)
    labelled = np.flatnonzero(items["status"].to_numpy() == LABELLED)
    cross = decision.p_wrong_cross if decision.p_wrong_cross is not None else np.full(len(pool), np.nan)
    pool_values = (decision.p_wrong, decision.p_wrong_lo, decision.p_wrong_hi, cross)
    for col, values_u in zip(P_WRONG, pool_values):
        values = np.full(len(items), np.nan)
        values[pool] = values_u
        if col in ("p_wrong", "p_wrong_cross"):
            values[labelled] = decision.labelled_p_wrong
        items[col] = values
    return decision.flips, decision.info


def _by_scores(items: pd.DataFrame, rule, pool: np.ndarray, m: float, eta: float, seed: int) -> np.ndarray:
    """(n_U,) flips of a score rule applied per scoring group to the normalised scores."""
    scores, groups = items["score"].to_numpy(), items["group"].to_numpy()
    flips = np.zeros(len(pool), bool)
    for g in pd.unique(groups[pool]):
        in_group = groups[pool] == g
        f = np.asarray(rule(scores[pool[in_group]], RuleContext(m=m, eta=eta, group=str(g), seed=seed)), bool)
        if f.shape != (int(in_group.sum()),):
            raise ValueError(f"rule {rule_name(rule)!r} returned shape {f.shape}, need ({int(in_group.sum())},)")
        flips[in_group] = f
    for col in P_WRONG:
        items[col] = np.nan
    return flips


def apply_rule(
    items: pd.DataFrame, rule, *, crossfit: CrossFit | None, m: float, eta: float, seed: int
) -> tuple[pd.DataFrame, DecisionSummary | None]:
    """Flips, adjusted verdicts and (calibrated rules) P(judge wrong) of the pool rows (role U) by ``rule``.

    Args:
        items: the audit's item table (columns ``role``, ``status``, ``judge``, ``score``, ``group``).
        rule: a rule name, a :class:`~puaudit_jax.audit.rules.CalibratedRule` or a score-rule callable.
        crossfit: the audit's cross-fitted features (needed by calibrated rules), or None.
        m: the transported mass, passed to score rules.
        eta: the flip threshold on normalised scores, passed to score rules.
        seed: seed of the calibrated rule's bootstrap.

    Returns:
        A copy of ``items`` (columns ``flipped``, ``adjusted`` and the P(judge wrong) columns) and the
        calibrated rule's :class:`~puaudit_jax.audit.rules.DecisionSummary` (None for score rules).

    Raises:
        ValueError: a calibrated rule without the cross-fitted feature it needs, or a score rule that
            returns the wrong shape.
    """
    rule = get_rule(rule)
    items = items.copy()
    pool = np.flatnonzero(items["role"].to_numpy() == "U")
    flips = np.zeros(len(items), bool)
    if needs_crossfit(rule):
        flips[pool], info = _calibrated(items, rule, crossfit, pool, seed)
    else:
        flips[pool], info = _by_scores(items, rule, pool, m, eta, seed), None
    return with_flips(items, flips), info
