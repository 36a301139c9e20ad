"""Stage 4, ``references``: the denoised positives P' per question type (PUAudit §3.2, Alg. 1 l. 7-12).

Each question type's positives are denoised on their own (:func:`puaudit_jax.audit.denoise.denoise`,
alpha1, alpha2); types with fewer than ``min_group_size`` positives are denoised together in one
pooled group (:data:`POOLED_TYPE`). A scoring group uses its type's own P' when it has one, else
the union of every P' (:func:`reference_for`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .config import AuditConfig
from .denoise import denoise

POOLED_TYPE = "(pooled small types)"


@dataclass(frozen=True)
class DenoisingGroup:
    """One denoising group: its name, the types in it, positives n_P -> core n_core -> kept n_kept.

    Attributes:
        question_type: the group's name (a question type, or :data:`POOLED_TYPE`).
        n_P: positives denoised.
        n_core: positives left by the first step (alpha1).
        n_kept: positives kept in P' (after alpha2).
        types: the question types in the group.
    """

    question_type: str
    n_P: int
    n_core: int
    n_kept: int
    types: tuple[str, ...]

    def to_dict(self) -> dict:
        """JSON-able form (types as a list)."""
        return {**asdict(self), "types": list(self.types)}

    @classmethod
    def from_dict(cls, data: dict) -> DenoisingGroup:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**data, "types": tuple(data["types"])})


@dataclass(frozen=True)
class References:
    """The denoised positives P' of every denoising group.

    Attributes:
        own: type -> rows of its P' (types denoised on their own).
        union: every kept row.
        kept: (n,) bool mask of kept rows.
        groups: one :class:`DenoisingGroup` per denoising group.
    """

    own: dict
    union: np.ndarray
    kept: np.ndarray
    groups: tuple[DenoisingGroup, ...]


def _denoising_groups(positives: np.ndarray, types: np.ndarray, min_size: int) -> tuple[list, list]:
    """([(name, rows)], small types): one group per type with >= min_size positives, one pooled."""
    present = pd.unique(types[positives])
    small = [ty for ty in present if (types[positives] == ty).sum() < min_size]
    groups = [(ty, positives[types[positives] == ty]) for ty in present if ty not in small]
    if small:
        groups.append((POOLED_TYPE, positives[np.isin(types[positives], small)]))
    return groups, small


def references(
    positives: np.ndarray, types: np.ndarray, e_winner: np.ndarray, z: np.ndarray, config: AuditConfig
) -> References:
    """Denoise ``positives`` per question type into the references P'.

    Args:
        positives: (n_P,) row numbers of P.
        types: (n,) question type of every row.
        e_winner: (n, d) F(x, o_winner) of every row.
        z: (n, d) unit difference vectors of every row.
        config: the audit's settings (alpha1, alpha2, min_group_size).

    Returns:
        The :class:`References`.
    """
    kept = np.zeros(len(types), bool)
    own, report = {}, []
    groups, small = _denoising_groups(positives, types, config.min_group_size)
    for ty, rows in groups:
        res = denoise(e_winner[rows], z[rows], alpha1=config.alpha1, alpha2=config.alpha2)
        keep = rows[res.keep]
        kept[keep] = True
        if ty != POOLED_TYPE:
            own[ty] = keep
        report.append(
            DenoisingGroup(
                str(ty),
                int(res.n),
                int(res.n_core),
                int(res.n_kept),
                tuple(sorted(small)) if ty == POOLED_TYPE else (ty,),
            )
        )
    return References(own, np.flatnonzero(kept), kept, tuple(report))


def scoring_groups(rows: np.ndarray, types: np.ndarray, config: AuditConfig) -> list:
    """Names of the scoring groups of ``rows``: their question types, or ["all"] when pooled.

    Args:
        rows: row indices.
        types: every row's question type, indexed by row.
        config: the audit's settings (``group_by``).
    """
    return list(pd.unique(types[rows])) if config.group_by == "question_type" else ["all"]


def members(rows: np.ndarray, group, types: np.ndarray, config: AuditConfig) -> np.ndarray:
    """The rows of ``rows`` in scoring group ``group``.

    Args:
        rows: row indices.
        group: the group's name (a question type, or "all").
        types: every row's question type, indexed by row.
        config: the audit's settings (``group_by``).
    """
    return rows[types[rows] == group] if config.group_by == "question_type" else rows


def reference_for(group, refs: References, config: AuditConfig) -> tuple[np.ndarray, str]:
    """(rows of P', "own type" | "pooled" | "all") of scoring group ``group``.

    A type's own P' when it was denoised alone, else the union of every P'.

    Args:
        group: the group's name (a question type, or "all").
        refs: the denoised references.
        config: the audit's settings (``group_by``).
    """
    if config.group_by == "question_type" and group in refs.own:
        return refs.own[group], "own type"
    return refs.union, ("pooled" if config.group_by == "question_type" else "all")
