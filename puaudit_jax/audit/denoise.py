"""P-group denoising (PUAudit §3.2 "Positive group denoising", Appendix A.4).

Within one question type, from the human-verified positives P (n items):

1. P-core filtering: e_i = F(x_i, o_i^w) (winner's embedding, winner by the human);
   ē = mean_i e_i; keep the top floor(alpha1 * n) by cos(e_i, ē)            -> P^(1)
2. Improvement alignment: z̄ = mean of z_i over P^(1); keep the top ``floor(alpha2 * |P^(1)|)`` by
   cos(z_i, z̄)                                                             -> P'

Sizes use floor, as in the paper, but never drop below one item (a type with 1 positive keeps it).
Ties in similarity keep the earlier item (stable sort), so the result is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DenoiseResult:
    """keep: indices into the input (n,) of P' in input order; n, n_core (``|P^(1)|``), n_kept (``|P'|``)."""

    keep: np.ndarray
    n: int
    n_core: int
    n_kept: int


def kept_size(n: int, alpha: float) -> int:
    """floor(alpha * n), at least 1 when n >= 1 (a tiny epsilon guards 0.7 * 10 = 6.999...)."""
    if n <= 0:
        return 0
    return max(1, int(np.floor(alpha * n + 1e-9)))


def _cosine_to(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(centre)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = vectors @ centre / norms
    return np.where(norms > 0, cos, -np.inf)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.sort(np.argsort(-scores, kind="stable")[:k])


def denoise(e_winner: np.ndarray, z: np.ndarray, *, alpha1: float = 0.7, alpha2: float = 0.7) -> DenoiseResult:
    """Two-stage filter of one group.

    Args:
        e_winner: the winners' embeddings F(x, o_w), shape (n, d).
        z: the unit difference embeddings, shape (n, d).
        alpha1: the share kept by the first stage (closest to the mean winner embedding), in (0, 1].
        alpha2: the share of the first stage's rows kept by the second (closest to their mean
            difference), in (0, 1].

    Returns:
        The :class:`DenoiseResult` (the kept row indices and the stage sizes).

    Raises:
        ValueError: an alpha outside (0, 1], or an empty group.
    """
    for name, alpha in (("alpha1", alpha1), ("alpha2", alpha2)):
        if not 0 < alpha <= 1:
            raise ValueError(f"{name} must be in (0, 1], got {alpha!r}")
    e_winner, z = np.asarray(e_winner, np.float64), np.asarray(z, np.float64)
    n = len(z)
    if n == 0:
        raise ValueError("denoise: empty positive group")
    core = _top(_cosine_to(e_winner, e_winner.mean(0)), kept_size(n, alpha1))
    zc = z[core]
    kept = core[_top(_cosine_to(zc, zc.mean(0)), kept_size(len(core), alpha2))]
    return DenoiseResult(keep=kept, n=n, n_core=len(core), n_kept=len(kept))
