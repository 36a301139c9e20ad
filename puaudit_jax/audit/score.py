"""Stage 5, ``score``: every pool item's score against its group's P' (PUAudit §3.3, Alg. 1 l. 13-16).

Scoring groups are the pool's question types (``group_by="question_type"``: each type's U against
its own P', or the union of every P' when the type has none) or one group ``"all"``. The scorer
(:mod:`puaudit_jax.audit.scorers`; the paper's: entropic partial OT, s_j = mass received) gives raw scores
s_j >= 0; normalised s̄_j = s_j / max_k s_k within the group.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from .config import AuditConfig
from .orient import Oriented
from .prepare import AuditData
from .references import References, members, reference_for, scoring_groups
from .scorers import scorer_name


@dataclass(frozen=True)
class ScoringGroup:
    """One scoring group: its size, its reference P', the solver's path and summary.

    Attributes:
        group: the group's name (a question type, or "all").
        n_U: pool items scored.
        n_reference: rows of its reference P'.
        reference: which P': "own type" | "pooled" | "all".
        all_zero_scores: whether every score was 0.
        method: the solver path.
        solver: the solver's own summary, or None.
        n_flipped: flips in the group, once the decision stage ran (else None).
    """

    group: str
    n_U: int
    n_reference: int
    reference: str
    all_zero_scores: bool
    method: str
    solver: dict | None = None
    n_flipped: int | None = None

    def to_dict(self) -> dict:
        """JSON-able form (``n_flipped`` left out while None)."""
        out = asdict(self)
        if self.n_flipped is None:
            out.pop("n_flipped")
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ScoringGroup:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


@dataclass(frozen=True)
class Scores:
    """The pool's scores, one entry per row.

    Attributes:
        score_raw: (n,) raw scores s_j >= 0 (NaN outside U).
        score: (n,) normalised scores s_j / max_k s_k within the group (NaN outside U).
        group: (n,) scoring group ("" outside U).
        groups: one :class:`ScoringGroup` each.
        solver_s: seconds in the scorer.
    """

    score_raw: np.ndarray = field(repr=False)
    score: np.ndarray = field(repr=False)
    group: np.ndarray = field(repr=False)
    groups: tuple[ScoringGroup, ...]
    solver_s: float


def scored(
    scorer, zp: np.ndarray, zu: np.ndarray, m: float, config: AuditConfig, group, warn: bool = True
) -> tuple[np.ndarray, np.ndarray, object]:
    """(raw scores (k,), normalised s / max s (k,), scorer result) of pool ``zu`` against ``zp``.

    All-zero scores normalise to zeros (with a warning when ``warn``).

    Args:
        scorer: the scorer (``scorer(zp, zu, m)``).
        zp: the reference (positive) rows, shape (n_P, d).
        zu: the pool rows, shape (k, d).
        m: the mass to transport, in (0, 1].
        config: the audit's settings (names the scorer in errors).
        group: the group's name, for errors and the warning.
        warn: whether to warn on all-zero scores.

    Raises:
        ValueError: scores that are not k finite values >= 0.
    """
    result = scorer(zp, zu, m)
    s = np.asarray(result.scores, np.float64)
    if s.shape != (len(zu),) or not np.isfinite(s).all() or (s < 0).any():
        raise ValueError(
            f"scorer {scorer_name(config.scorer)!r} returned invalid scores for group {group!r} "
            f"(need {len(zu)} finite values >= 0)"
        )
    top = s.max()
    if not top > 0:
        if warn:
            warnings.warn(
                f"group {group!r}: every score is 0; normalised scores set to 0", RuntimeWarning, stacklevel=2
            )
        return s, np.zeros_like(s), result
    return s, s / top, result


def score(data: AuditData, oriented: Oriented, refs: References, m: float, config: AuditConfig) -> Scores:
    """Score the pool, one scoring group at a time.

    Args:
        data: the prepared audit data.
        oriented: the oriented difference vectors.
        refs: the references P'.
        m: the transported mass, in (0, 1].
        config: the audit's settings (scorer, group_by).

    Returns:
        The :class:`Scores`.

    Raises:
        ValueError: the scorer returned invalid scores (wrong shape, non-finite or negative).
    """
    scorer = config.make_scorer()
    score_raw, score_norm = np.full(data.n, np.nan), np.full(data.n, np.nan)
    group = np.array([""] * data.n, dtype=object)
    groups, solver_s = [], 0.0
    pool, z = oriented.unlabelled, oriented.z
    for g in scoring_groups(pool, data.types, config):
        rows = members(pool, g, data.types, config)
        ref, reference = reference_for(g, refs, config)
        group[rows] = g
        t = time.perf_counter()
        s, normalised, result = scored(scorer, z[ref], z[rows], m, config, g)
        solver_s += time.perf_counter() - t
        score_raw[rows], score_norm[rows] = s, normalised
        groups.append(
            ScoringGroup(str(g), int(len(rows)), int(len(ref)), reference, not s.max() > 0, result.method, result.info)
        )
    return Scores(score_raw, score_norm, group, tuple(groups), solver_s)
