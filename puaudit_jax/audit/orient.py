"""Stage 3, ``orient``: unit difference vectors pointing from loser to winner (PUAudit §3.1, Eq. 1/3).

Positives P (labelled rows not held out) are oriented by the human verdict, the pool U
(unlabelled rows) by the judge's: z = (F(x, o_w) - F(x, o_l)) / ||.||.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datasets.verdicts import A
from .mass import MassEstimate
from .prepare import AuditData
from .scorers import unit_rows


@dataclass(frozen=True)
class Oriented:
    """The oriented difference vectors of the audit's rows.

    Attributes:
        positives: (n_P,) row numbers of P.
        unlabelled: (n_U,) row numbers of U.
        z: (n, d) unit difference vectors, winner minus loser (zero rows outside P and U).
        e_winner: (n, d) F(x, o_winner) of every row.
    """

    positives: np.ndarray
    unlabelled: np.ndarray
    z: np.ndarray = field(repr=False)
    e_winner: np.ndarray = field(repr=False)


def judge_oriented(data: AuditData, rows: np.ndarray) -> np.ndarray:
    """(len(rows), d) unit difference vectors of ``rows`` oriented by the judge's verdict."""
    sign = np.where(data.judge[rows] == A, 1.0, -1.0)[:, None]
    return unit_rows(sign * data.diff[rows])


def orient(data: AuditData, mass: MassEstimate) -> Oriented:
    """Orient P by the human verdict, U by the judge's.

    Args:
        data: the prepared audit data.
        mass: the mass estimate; its held-out rows are not positives.

    Returns:
        The :class:`Oriented` vectors.
    """
    positives = np.setdiff1d(data.labelled, mass.held)
    unlabelled = data.unlabelled
    winner = np.where(np.isin(np.arange(data.n), positives), data.human, data.judge)
    sign = np.where(winner == A, 1.0, -1.0)[:, None]
    diff = data.diff
    z = np.zeros_like(diff)
    rows = np.concatenate([positives, unlabelled])
    z[rows] = unit_rows(sign[rows] * diff[rows])
    e_winner = np.where(winner[:, None] == A, data.ea, data.eb)
    return Oriented(positives, unlabelled, z, e_winner)
