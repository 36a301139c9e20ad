"""The seam of the guarantee: ``certify(stages, roles, human, settings) -> Certification``.

One stage per judge, cheapest first (one stage without a cascade). Stage k is tested at D / (number of
stages) on the rows no earlier stage certified (Jung et al. §4, the cascade): its candidates are chosen
among as :func:`.candidates.choose` does, its pool is the pool rows no earlier stage certified, its
calibration rows those that reach it. With probability >= 1 - D every stage's certified rows agree with
humans at least A of the time, and so does their union. A row goes to the first stage certified for it;
a row no stage is certified for is escalated to a human.

A calibration row reaches stage k when no earlier stage's kept candidate certified it, which is known only
where that candidate's confidence is what the pool's would be (``Candidate.known``): the rows the audit
fitted an earlier judge's P(judge wrong) on calibrate no later stage once that judge's fitted candidate is
kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .candidates import Candidate, Choice, choose
from .roles import RowRoles


@dataclass(frozen=True)
class Stage:
    """One judge of the cascade (or the judge alone).

    Attributes:
        name: "judge" for the judge audited, else the other judge's column.
        judge: (n,) that judge's verdicts.
        candidates: its :class:`~.candidates.Candidate` s, tested at an even share of the stage's level.
        p_wrong: (n,) its audit's P(judge wrong) (NaN where none), reported beside the decisions.
    """

    name: str
    judge: np.ndarray = field(repr=False)
    candidates: tuple[Candidate, ...] = ()
    p_wrong: np.ndarray | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Settings:
    """What the guarantee promises: agreement >= ``agreement`` with probability >= 1 - ``delta``."""

    agreement: float
    delta: float


@dataclass(frozen=True)
class Certification:
    """What :func:`certify` decided for every row.

    Attributes:
        stage: (n,) the index of the stage certified for each pool row, -1 where escalated and off the pool.
        final: (n,) the final verdict of each certified pool row; the first judge's elsewhere.
        choices: one :class:`~.candidates.Choice` per stage.
        reached: per stage, the pool rows it had to decide.
    """

    stage: np.ndarray = field(repr=False)
    final: np.ndarray = field(repr=False)
    choices: tuple[Choice, ...]
    reached: tuple[int, ...]

    def certified(self, pool: np.ndarray) -> np.ndarray:
        """(len(pool),) bool, the pool rows some stage certified."""
        return self.stage[pool] >= 0


def _taken(candidate: Candidate, threshold: float) -> np.ndarray:
    """(n,) bool, the rows the candidate certifies at ``threshold`` (known rows with q >= it)."""
    return candidate.known & (candidate.q >= threshold)


def certify(stages: list[Stage], roles: RowRoles, human: np.ndarray, settings: Settings) -> Certification:
    """Each pool row to the first stage certified for it, or to a human (module docstring).

    Args:
        stages: one :class:`Stage` per judge, cheapest first.
        roles: the :class:`~.roles.RowRoles` (pool rows to decide; calibration rows in the candidates).
        human: (n,) the human verdicts (read on calibration rows only).
        settings: A and D.

    Returns:
        The :class:`Certification`.
    """
    n = len(human)
    stage_of, final = np.full(n, -1), np.asarray(stages[0].judge, dtype=object).copy()
    reach, left, choices, reached = np.ones(n, bool), np.asarray(roles.pool), [], []
    for k, stage in enumerate(stages):
        choice = choose(list(stage.candidates), left, human, settings.agreement, settings.delta / len(stages), reach)
        choices.append(choice)
        reached.append(len(left))
        if choice.kept is None:
            continue
        candidate = next(c for c in stage.candidates if c.name == choice.kept)
        taken = _taken(candidate, choice.selection.threshold)
        rows = left[taken[left]]
        stage_of[rows], final[rows] = k, candidate.final[rows]
        reach &= candidate.known & ~taken
        left = left[~taken[left]]
    return Certification(stage_of, final, tuple(choices), tuple(reached))
