"""Stage 2, ``estimate_m``: the transported mass m (PUAudit §5.1).

Given by the user, or estimated as the judge-human agreement on a held-out part of the labelled
rows (``holdout`` fraction per question type, floor, at least one row overall), clipped to
``m_clip``. Held-out rows are not used as positives. The paper's Generator is consumed here first;
its state after this stage travels in :attr:`MassEstimate.rng_state` to the cross-fitting stage,
so one seed fixes the whole audit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .config import AuditConfig
from .prepare import AuditData


@dataclass(frozen=True)
class MassEstimate:
    """The transported mass m and where it came from.

    Attributes:
        value: the m the audit uses, in (0, 1].
        source: "given" or "estimated".
        raw: the unclipped agreement (None when given).
        n_holdout: rows it was measured on.
        clip: the (low, high) range or None.
        clipped: value != raw.
        held: (n_holdout,) row numbers of the held-out rows.
        rng_state: the numpy bit-generator state after drawing them.
    """

    value: float
    source: str
    raw: float | None
    n_holdout: int
    clip: tuple[float, float] | None
    clipped: bool
    held: np.ndarray = field(repr=False, default_factory=lambda: np.array([], int))
    rng_state: dict = field(repr=False, default=None)

    def to_dict(self) -> dict:
        """JSON-able form (without the held-out rows and the generator state)."""
        return {
            "value": self.value,
            "source": self.source,
            "raw": self.raw,
            "n_holdout": self.n_holdout,
            "clip": None if self.clip is None else list(self.clip),
            "clipped": self.clipped,
        }

    @classmethod
    def from_dict(cls, data: dict) -> MassEstimate:
        """Inverse of :meth:`to_dict` (no held-out rows, no generator state)."""
        clip = data.get("clip")
        return cls(
            value=data["value"],
            source=data["source"],
            raw=data.get("raw"),
            n_holdout=data.get("n_holdout", 0),
            clip=None if clip is None else tuple(clip),
            clipped=bool(data.get("clipped", False)),
        )

    def generator(self) -> np.random.Generator:
        """A Generator continuing where this stage left the audit's seed."""
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = self.rng_state
        return rng


def holdout_rows(labelled: np.ndarray, types: np.ndarray, fraction: float, rng) -> np.ndarray:
    """Per type floor(fraction * n) random labelled rows; at least one overall (needs >= 2).

    Args:
        labelled: the labelled rows' indices.
        types: every row's question type, indexed by row.
        fraction: the share of each type's labelled rows held out.
        rng: the numpy generator.

    Returns:
        The held-out row indices, sorted.

    Raises:
        ValueError: fewer than 2 labelled rows when one must be held out.
    """
    chosen = []
    for t in pd.unique(types[labelled]):
        rows = labelled[types[labelled] == t]
        k = int(np.floor(fraction * len(rows) + 1e-9))
        if k:
            chosen.append(rng.choice(rows, size=k, replace=False))
    chosen = np.sort(np.concatenate(chosen)) if chosen else np.array([], int)
    if len(chosen) == 0 and fraction > 0:
        if len(labelled) < 2:
            raise ValueError(
                f"estimating m needs at least 2 labelled comparisons (one held out, one "
                f"positive); have {len(labelled)}. Give m explicitly."
            )
        chosen = np.array([rng.choice(labelled)])
    return chosen


def estimate_m(data: AuditData, config: AuditConfig) -> MassEstimate:
    """The mass m given by ``config.m``, or measured on a holdout of ``data``'s labelled rows.

    Args:
        data: the prepared audit data.
        config: the audit's settings (m, holdout, m_clip, seed).

    Returns:
        The :class:`MassEstimate`; its generator state continues the audit's seed.

    Raises:
        ValueError: m is not given and the holdout is empty, or takes every labelled row.
    """
    rng = np.random.default_rng(config.seed)
    if config.m is not None:
        return MassEstimate(float(config.m), "given", None, 0, None, False, rng_state=rng.bit_generator.state)
    labelled = data.labelled
    held = holdout_rows(labelled, data.types, config.holdout, rng)
    if len(held) == 0:
        raise ValueError("m is not given and holdout = 0: nothing to estimate m from")
    if len(held) == len(labelled):
        raise ValueError(
            "every labelled comparison was held out to estimate m; P is empty "
            f"({len(labelled)} labelled, holdout={config.holdout}). Lower holdout or give m."
        )
    raw = float(np.mean(data.judge[held] == data.human[held]))
    value = float(np.clip(raw, *config.m_clip))
    return MassEstimate(
        value, "estimated", raw, int(len(held)), tuple(config.m_clip), value != raw, held, rng.bit_generator.state
    )
