"""The ways to rank a judge's verdicts that the guarantee may certify by, and the choice among them.

A :class:`Candidate` is a confidence q for every row, the final verdict it stands for, and the labelled
rows whose labels may test it: rows the confidence treats as it treats the pool (the same function of
the data, fitted on none of them). Two kinds, both valid by construction:

- ``label-free``: :func:`~puaudit_jax.audit.evidence.label_free_score` (the judge's agreement with its
  swapped order and with the other judges, its preference certainty); final verdict the judge's. No
  label fits it, so every labelled row tests it.
- ``fitted``: the audit's P(judge wrong) p (embedding, style, both orders, confidence, other judges),
  q = max(p, 1 - p), the verdict flipped where p > 1/2. It was fitted on part of the labels, so only
  the rows whose labels were hidden from the audit test it.

**The choice** (:func:`choose`): the level D is split among the candidates by their ``share`` (Bonferroni;
shares set before any label is read); each runs its fallback sequence (:mod:`.testing`) at its share; the
candidate whose certified set covers the most of the pool is kept (ties: the larger lower bound). With
probability >= 1 - D every candidate's rejections are right at once, so the kept one's are.
``certify="fitted-ppi"`` tests the fitted confidence with the prediction-powered p-values of
:mod:`.semi_supervised`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...datasets.verdicts import flip_verdict
from .semi_supervised import ppi_curve
from .testing import WEIGHTS, Selection, binomial_curve, confidence, select_on


@dataclass(frozen=True)
class Candidate:
    """One way to rank the final verdicts, and the rows whose labels may test it.

    Attributes:
        name: "label-free", "fitted" or "fitted-ppi".
        q: (n,) confidence of every row's final verdict (-inf: never certified).
        final: (n,) the final verdict of every row.
        known: (n,) bool, rows where q is what it would be on the pool (a cascade can tell whether this
            candidate would have certified them; the calibration rows are among them).
        calibration: (k,) row indices whose labels test it (within ``known``).
        semi_supervised: test with prediction-powered p-values (:mod:`.semi_supervised`).
        weights: where its level goes (:data:`~.testing.WEIGHTS`).
        share: its share of the judge's level D when tested beside others (the shares of a judge's candidates
            sum to 1).
    """

    name: str
    q: np.ndarray = field(repr=False)
    final: np.ndarray = field(repr=False)
    known: np.ndarray = field(repr=False)
    calibration: np.ndarray = field(repr=False)
    semi_supervised: bool = False
    weights: tuple = WEIGHTS
    share: float = 1.0


def label_free(score: np.ndarray, judge: np.ndarray, labelled: np.ndarray) -> Candidate:
    """The label-free :class:`Candidate`: ``score`` (n,) on the judge's verdicts, every labelled row testing it.

    Args:
        score: (n,) :func:`~puaudit_jax.audit.evidence.label_free_score` (-inf where the judge picked no side).
        judge: (n,) the judge's verdicts.
        labelled: (k,) indices of the labelled rows that calibrate (a human side, or a tie counted as
            disagreement).
    """
    score, everywhere = np.asarray(score, float), np.ones(len(score), bool)
    return Candidate("label-free", score, np.asarray(judge, dtype=object), everywhere, np.asarray(labelled))


def fitted(p_wrong: np.ndarray, judge: np.ndarray, hidden: np.ndarray, pool: np.ndarray,
           semi_supervised: bool = False) -> Candidate:  # fmt: skip
    """The fitted :class:`Candidate` of the audit's P(judge wrong), tested on the ``hidden`` rows.

    Args:
        p_wrong: (n,) P(judge wrong), NaN where the audit gave none (the rows it fitted on, ties).
        judge: (n,) the judge's verdicts.
        hidden: (k,) indices of the labelled rows whose labels were hidden from the audit.
        pool: (m,) indices of the pool rows (with ``hidden``, the rows where p is what the pool gets).
        semi_supervised: the prediction-powered test (``fitted-ppi``).
    """
    p = np.asarray(p_wrong, float)
    known = np.zeros(len(p), bool)
    known[np.concatenate([np.asarray(hidden, int), np.asarray(pool, int)])] = True
    return Candidate("fitted-ppi" if semi_supervised else "fitted", confidence(p), final_verdicts(p, judge), known,
                     np.asarray(hidden), semi_supervised)  # fmt: skip


def final_verdicts(p_wrong: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """(n,) the judge's verdict where P(judge wrong) <= 1/2 (or unknown), the flipped one where it is above."""
    judge = np.asarray(judge, dtype=object)
    return np.where(np.asarray(p_wrong, float) > 0.5, flip_verdict(judge), judge)


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` tested and kept for one judge.

    Attributes:
        selections: candidate name -> its :class:`~.testing.Selection` (in the candidates' order).
        kept: the name of the candidate kept, or None when none certified anything.
        n_calibration: candidate name -> the calibration rows that tested it.
    """

    selections: dict
    kept: str | None
    n_calibration: dict

    @property
    def selection(self) -> Selection | None:
        """The kept candidate's selection, or None."""
        return None if self.kept is None else self.selections[self.kept]


def try_candidate(candidate: Candidate, calibration: np.ndarray, pool: np.ndarray, human: np.ndarray,
                   agreement: float, level: float) -> Selection:  # fmt: skip
    """One candidate's :class:`~.testing.Selection` at ``level`` on the given calibration and pool rows.

    Args:
        candidate: the :class:`Candidate`.
        calibration: (k,) row indices of its calibration rows (a cascade passes those that reach the judge).
        pool: (m,) row indices of the pool rows (the grid is theirs).
        human: (n,) the human verdicts (read on ``calibration`` only).
        agreement: A in (0, 1).
        level: the candidate's share of D.
    """
    correct = candidate.final[calibration] == human[calibration]
    curve_of = ppi_curve if candidate.semi_supervised else binomial_curve
    curve = curve_of(candidate.q[calibration], correct, candidate.q[pool], agreement)
    return select_on(curve, len(calibration), agreement, level, candidate.weights)


def choose(candidates: list[Candidate], pool: np.ndarray, human: np.ndarray, agreement: float, delta: float,
           reach: np.ndarray | None = None) -> Choice:  # fmt: skip
    """Every candidate tested at its share of D; the one covering most of the pool kept (module docstring).

    Args:
        candidates: the judge's candidates (one or more).
        pool: (m,) row indices of the pool rows still to decide.
        human: (n,) the human verdicts.
        agreement: A in (0, 1).
        delta: D for this judge.
        reach: (n,) bool, the rows that reach this judge (a cascade: no earlier judge certified them), or
            None (every row).

    Returns:
        The :class:`Choice`.
    """
    total = sum(c.share for c in candidates)
    selections, sizes = {}, {}
    for c in candidates:
        rows = c.calibration if reach is None else c.calibration[reach[c.calibration]]
        level = delta * c.share / total
        selections[c.name], sizes[c.name] = try_candidate(c, rows, pool, human, agreement, level), len(rows)
    certified = [(s.coverage, s.row.lower, -k) for k, s in enumerate(selections.values()) if s.threshold is not None]
    kept = None if not certified else list(selections)[-max(certified)[2]]
    return Choice(selections, kept, sizes)
