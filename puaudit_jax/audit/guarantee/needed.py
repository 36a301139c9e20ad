"""How many more labels would certify something, when nothing was: a range, from simulation.

When no candidate certified anything, the labels at hand may simply be too few. The simulation asks what
a larger random sample would have done: for a total of L labelled rows, each candidate's calibration rows
are redrawn with replacement from its own (confidence, correct) pairs, as many as it would have out of L
(the fitted candidate about half, the label-free one all), and each is tested again on the same pool, at
its share of D as before, with exact binomial p-values. The confidences stay as they are (the fitted map
is not refitted on the larger sample). The answer is the range of extra labels from where half of the
simulated samples certify something to where ``HIGH`` of them do; never 0 (nothing was certified with
the labels at hand), never more than the pool (the rows that exist to be labelled); None when labelling
the whole pool would certify something in fewer than half of them: better evidence or a lower A is
needed, not more labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .candidates import Candidate
from .testing import binomial_curve, fallback, place, thresholds

DRAWS = 100  # simulated samples per size
LOW, HIGH = 0.5, 0.9  # the range: from where half of the samples certify to where 90 % do


@dataclass(frozen=True)
class LabelsNeeded:
    """More labelled rows that would certify some pool rows, as a range.

    Attributes:
        low: extra labels with which half of the simulated samples certify something (>= 1).
        high: extra labels with which ``HIGH`` of them do, or None when not even labelling the whole pool does.
        pool: the rows that can still be labelled (the upper limit of both).
        draws: simulated samples per size.
    """

    low: int
    high: int | None
    pool: int
    draws: int = DRAWS

    def text(self) -> str:
        """The range in words."""
        head = "more labelled rows (a random sample of the pool) would certify some rows"
        if self.high == self.low:
            return f"about {self.low} {head}: with that many, {HIGH:.0%} of {self.draws} simulated samples do"
        low = f"with {self.low}, {LOW:.0%} of {self.draws} simulated samples do"
        if self.high is None:
            return (f"at least {self.low} {head}: {low}; not even labelling the whole pool ({self.pool} rows) makes "
                    f"{HIGH:.0%} of them do")  # fmt: skip
        return f"between {self.low} and {self.high} {head}: {low}, with {self.high}, {HIGH:.0%}"


def certify_share(candidates, pool, human, agreement, delta, scale: float, rng, draws: int = DRAWS) -> float:
    """The share of ``draws`` simulated samples, ``scale`` times the labels at hand, that certify something.

    Each candidate's calibration rows are redrawn with replacement, ``scale`` times as many, and tested at
    its share of D with exact binomial p-values on the pool's grid (computed once).

    Args:
        candidates: the judge's :class:`~.candidates.Candidate` s.
        pool: the pool rows' indices.
        human: every row's human verdict, shape (n,).
        agreement: the agreement A to certify, in (0, 1).
        delta: the level D (the probability the guarantee may fail), in (0, 1).
        scale: calibration rows drawn per row at hand (>= 1: 1 + extra labels / labelled rows).
        rng: the numpy generator of the draws.
        draws: simulated samples.

    Returns:
        The share in [0, 1].
    """
    total, hits, fixed = sum(c.share for c in candidates), 0, []
    for c in candidates:
        if len(c.calibration):
            size = max(1, int(round(len(c.calibration) * scale)))
            correct = c.final[c.calibration] == human[c.calibration]
            fixed.append((c, size, thresholds(c.q[pool]), correct, delta * c.share / total))
    for _ in range(draws):
        for c, size, grid, correct, level in fixed:
            drawn = rng.integers(0, len(c.calibration), size)
            curve = binomial_curve(c.q[c.calibration][drawn], correct[drawn], c.q[pool], agreement, grid)
            if fallback(curve.p_value, place(curve, size, agreement, level, c.weights))[0].any():  # certifies some
                hits += 1
                break
    return hits / draws


def _smallest(share_at, pool: int, target: float) -> int | None:
    """The smallest extra in [1, pool] whose simulated share reaches ``target`` (bisection), or None."""
    if share_at(pool) < target:
        return None
    lo, hi = 1, pool
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if share_at(mid) >= target else (mid + 1, hi)
    return lo


def labels_needed(candidates: list[Candidate], pool: np.ndarray, human: np.ndarray, n_labelled: int,
                  agreement: float, delta: float, seed: int = 0) -> LabelsNeeded | None:  # fmt: skip
    """The :class:`LabelsNeeded` of a judge whose candidates certified nothing (module docstring).

    Args:
        candidates: the judge's candidates, as tested.
        pool: (m,) row indices of the pool.
        human: (n,) the human verdicts.
        n_labelled: the labelled rows at hand (every candidate's calibration rows are drawn from them).
        agreement: A in (0, 1).
        delta: D.
        seed: the simulation's seed.

    Returns:
        The range, or None when labelling the whole pool would not make half of the samples certify.
    """
    if len(pool) == 0 or n_labelled == 0:
        return None
    cache: dict[int, float] = {}

    def share_at(extra: int) -> float:
        if extra not in cache:  # one stream per size: the bisection's answer does not depend on its path
            rng = np.random.default_rng([seed, extra])
            cache[extra] = certify_share(candidates, pool, human, agreement, delta, 1 + extra / n_labelled, rng)
        return cache[extra]

    low = _smallest(share_at, len(pool), LOW)
    if low is None:
        return None
    return LabelsNeeded(low, _smallest(share_at, len(pool), HIGH), len(pool))
