"""Synthetic comparisons from the paper's cone model (PUAudit §4.1, Assumptions 4.1-4.2).

Every comparison has a human-oriented unit difference z_h (winner minus loser, by the human).

- Judge-correct items (probability ``alpha``): z_h lies in the improvement cone around the type's
  consensus direction z̄_t: <z_h, z̄_t> uniform in [tau, 1), the rest a random orthogonal direction.
- Bias-flipped items (1 - alpha): the judge picked the human's loser, led by a nuisance direction;
  their judge-oriented difference z_j = -z_h is (nearly) orthogonal to quality:
  <z_j, z̄_t> uniform in ``neg_range`` = [lo, hi] with hi < tau (the margin delta = tau - hi). The
  default (-0.3, 0.3) is "orthogonal to quality"; (0, 0.6) puts negatives close to the cone.

Embeddings: F(x, o_w) = c + r z_h / 2, F(x, o_l) = c - r z_h / 2 with c a random "content" vector,
so e_w - e_l = r z_h exactly. Labelled rows carry the human verdict, unlabelled rows "missing";
the hidden truth of every row is returned separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..datasets.comparisons import validate_comparisons
from ..datasets.verdicts import MISSING, A, B, flip_verdict
from .embed import PairEmbeddings


@dataclass(frozen=True)
class ConeData:
    """A synthetic cone-model data set with its ground truth.

    Attributes:
        table: validated comparisons.
        embeddings: PairEmbeddings of every row.
        truth: (n,) human verdict of every row (also for unlabelled ones).
        judge_correct: (n,) bool.
    """

    table: pd.DataFrame
    embeddings: PairEmbeddings
    truth: np.ndarray
    judge_correct: np.ndarray


def _cone_vectors(rng, centre: np.ndarray, proj: np.ndarray) -> np.ndarray:
    """Unit vectors with <v, centre> = proj (centre a unit vector)."""
    k, d = len(proj), len(centre)
    u = rng.normal(size=(k, d))
    u -= (u @ centre)[:, None] * centre[None, :]
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return proj[:, None] * centre[None, :] + np.sqrt(1 - proj**2)[:, None] * u


def cone_comparisons(
    n_labelled: int = 200,
    n_unlabelled: int = 300,
    *,
    d: int = 64,
    alpha: float = 0.7,
    tau: float = 0.7,
    neg_range: tuple[float, float] = (-0.3, 0.3),
    types: tuple[str, ...] = ("t1", "t2"),
    type_spread: float = 0.3,
    radius: float = 1.0,
    seed: int = 0,
) -> ConeData:
    """Draw a cone-model comparison set (see the module docstring). Types are assigned round robin.

    Args:
        n_labelled: rows with the human verdict (the first ones).
        n_unlabelled: rows with it missing.
        d: the embeddings' dimension.
        alpha: the probability the judge is correct, in [0, 1].
        tau: the cone's cosine bound: correct items have <z_h, z̄_t> uniform in [tau, 1).
        neg_range: (lo, hi), the range of <z_j, z̄_t> of bias-flipped items, -1 < lo <= hi < tau.
        types: the question types.
        type_spread: how far the types' directions z̄_t scatter around a shared one.
        radius: the length r of e_w - e_l = r z_h.
        seed: the numpy seed.

    Returns:
        The :class:`ConeData` (the table, its embeddings and the hidden truth).

    Raises:
        ValueError: ``neg_range`` and ``tau`` not ordered -1 < lo <= hi < tau < 1.
    """
    lo, hi = neg_range
    if not -1 < lo <= hi < tau < 1:
        raise ValueError(f"need -1 < low <= high < tau < 1, got neg_range={neg_range}, tau={tau}")
    rng = np.random.default_rng(seed)
    n = n_labelled + n_unlabelled
    base = rng.normal(size=d)
    base /= np.linalg.norm(base)
    centres = {}
    for t in types:
        c = base + type_spread * rng.normal(size=d) / np.sqrt(d)
        centres[t] = c / np.linalg.norm(c)
    qtype = np.array([types[i % len(types)] for i in range(n)], dtype=object)
    correct = rng.random(n) < alpha
    z_h = np.zeros((n, d))
    for t in types:
        rows = np.flatnonzero(qtype == t)
        ok, bad = rows[correct[rows]], rows[~correct[rows]]
        z_h[ok] = _cone_vectors(rng, centres[t], rng.uniform(tau, 1.0, len(ok)))
        z_h[bad] = -_cone_vectors(rng, centres[t], rng.uniform(lo, hi, len(bad)))
    content = rng.normal(size=(n, d))
    e_w, e_l = content + radius * z_h / 2, content - radius * z_h / 2
    human = np.where(rng.random(n) < 0.5, A, B)
    judge = np.where(correct, human, flip_verdict(human))
    a = np.where((human == A)[:, None], e_w, e_l)
    b = np.where((human == A)[:, None], e_l, e_w)
    ids = np.array([f"syn:{i}" for i in range(n)])
    visible = np.where(np.arange(n) < n_labelled, human, MISSING)
    table = validate_comparisons(
        pd.DataFrame(
            {
                "id": ids,
                "question": [f"question {i}" for i in range(n)],
                "response_a": [f"answer a {i}" for i in range(n)],
                "response_b": [f"answer b {i}" for i in range(n)],
                "judge": judge,
                "human": visible,
                "question_type": qtype,
            }
        ),
        source="cone model",
    )
    return ConeData(table, PairEmbeddings(ids, a, b, source=f"cone model seed {seed}"), human.astype(object), correct)
