"""The agreement-beyond-chance targets of a comparison table: kappa (judge vs human) and alpha (named raters).

- ``beyond chance: kappa (judge vs human)``: Cohen's kappa of the judge and the human verdict on the
  labelled rows (:mod:`.chance`), by the delta method, the cluster bootstrap and PPI++ with the judge
  rating the pool.
- ``beyond chance: alpha (<raters>)``: nominal Krippendorff's alpha of the columns named by
  ``raters`` (:class:`~.config.QuantifyConfig`), by the delta method and the cluster bootstrap; its
  PPI++ row is not estimable (:data:`.chance.ALPHA_NO_PPI`).

**Raters** are columns. A cell holds one verdict (A / B / tie; missing, empty or None: no rating), or
several raters' votes separated by commas (``"A,tie,B"``) or as a list: the bundled sets' ``votes``
column holds every expert's (MT-Bench) or crowd worker's (LLMFAO) vote of the row. Nominal alpha does
not depend on which rater gave which vote within a unit, only on the values each unit holds, so the
votes of a cell need no rater names. Default (``raters`` empty): the judge and the human votes --
``judge,votes`` when the table has a ``votes`` column, else ``judge,human``. Other judges
(``--other-judges`` columns) and ``judge_swapped`` are named like any column.

**Clusters** of the bootstrap: the ``cluster_by`` column when given, else the question (its first user
turn, so MT-Bench's two turns of one question are one cluster); the delta method is cluster-robust only
with ``cluster_by``, as every other interval of :func:`~.pipeline.quantify`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..datasets.verdicts import JUDGE_VERDICTS, MISSING, normalize_verdict
from .chance import (
    ALPHA_NO_PPI,
    BOOTSTRAP,
    DELTA,
    PPI_DELTA,
    alpha_bootstrap,
    alpha_delta,
    kappa_bootstrap,
    kappa_delta,
    kappa_ppi,
)
from .estimators import not_estimable
from .targets import Inputs, TargetEstimate

BEYOND_CHANCE = "beyond chance: "
KAPPA = BEYOND_CHANCE + "kappa (judge vs human)"
VOTES = "votes"  # the bundled sets' column of individual human votes


def default_raters(table: pd.DataFrame) -> tuple[str, ...]:
    """The judge and the human votes: ``("judge", "votes")`` when ``table`` has votes, else ``("judge", "human")``."""
    return ("judge", VOTES if VOTES in table.columns else "human")


def _cell_votes(cell) -> list:
    """The votes of one cell: a list/tuple, a comma-separated string, or one value."""
    if isinstance(cell, list | tuple | np.ndarray):
        return list(cell)
    if isinstance(cell, str) and "," in cell:
        return cell.split(",")
    return [cell]


def rating_counts(table: pd.DataFrame, raters: tuple[str, ...]) -> np.ndarray:
    """(R, 3) how many ratings A, B and tie each row holds over the columns ``raters``.

    Args:
        table: the comparison table, R rows.
        raters: column names (see the module docstring for what a cell may hold).

    Returns:
        (R, 3) float counts in the order of :data:`~puaudit_jax.datasets.verdicts.JUDGE_VERDICTS`.

    Raises:
        ValueError: a column that is not in the table, named twice, or a value that is no verdict
            (naming the row's id and the column).
    """
    missing = [r for r in raters if r not in table.columns]
    if missing:
        raise ValueError(f"raters: {missing} not columns of the comparisons (columns: {list(table.columns)})")
    repeated = sorted({r for r in raters if raters.count(r) > 1})
    if repeated:
        raise ValueError(f"raters: {repeated} named more than once (a rater counted twice agrees with itself)")
    counts = np.zeros((len(table), len(JUDGE_VERDICTS)))
    ids = table["id"].astype(str).to_numpy() if "id" in table.columns else np.arange(len(table)).astype(str)
    for column in raters:
        for row, cell in enumerate(table[column].to_numpy(dtype=object)):
            for vote in _cell_votes(cell):
                try:
                    verdict = normalize_verdict(vote, allow_missing=True)
                except ValueError as err:
                    raise ValueError(f"raters: row {ids[row]!r}, column {column!r}: {err}") from None
                if verdict != MISSING:
                    counts[row, JUDGE_VERDICTS.index(verdict)] += 1
    return counts


def question_clusters(table: pd.DataFrame, cluster_by: str | None) -> np.ndarray:
    """(R,) str cluster of every row: ``cluster_by``'s value, else the question's first user turn."""
    if cluster_by is not None:
        return table[cluster_by].astype(str).to_numpy()
    if "question" not in table.columns:
        return table.index.astype(str).to_numpy()
    first = lambda q: str(q[0]) if isinstance(q, list | tuple | np.ndarray) and len(q) else str(q)  # noqa: E731
    return np.array([first(q) for q in table["question"].to_numpy(dtype=object)], dtype=object)


def kappa_rows(inp: Inputs, questions: np.ndarray, resamples: int, seed: int) -> list[TargetEstimate]:
    """Cohen's kappa of judge and human: delta method, cluster bootstrap (by ``questions``), PPI++.

    Args:
        inp: the table's :class:`~.targets.Inputs` (R rows).
        questions: (R,) the bootstrap's cluster of each row (:func:`question_clusters`).
        resamples: bootstrap resamples.
        seed: the bootstrap's seed.

    Returns:
        Three :class:`~.targets.TargetEstimate` rows of :data:`KAPPA` (kappa in [-1, 1]).
    """
    lab, unl = inp.labelled, inp.unlabelled
    human = np.where(inp.y == 1.0, "A", np.where(inp.y == 0.0, "B", "tie"))
    judge, n_unl = inp.judge, int(unl.sum())
    cl = None if inp.clusters is None else inp.clusters[lab]
    rows = [kappa_delta(judge[lab], human[lab], inp.level, n_unl, cl),
            kappa_bootstrap(judge[lab], human[lab], inp.level, questions[lab], resamples=resamples, seed=seed,
                            n_unlabelled=n_unl),
            kappa_ppi(judge[lab], human[lab], judge[unl], inp.level,
                      None if inp.clusters is None else (inp.clusters[lab], inp.clusters[unl]))]  # fmt: skip
    return [TargetEstimate(KAPPA, e) for e in rows]


def alpha_rows(table: pd.DataFrame, inp: Inputs, raters: tuple[str, ...], questions: np.ndarray, resamples: int,
               seed: int) -> list[TargetEstimate]:  # fmt: skip
    """Nominal Krippendorff's alpha of ``raters``: delta method, cluster bootstrap, and the not-estimable PPI++ row.

    Args:
        table: the comparison table, R rows.
        inp: its :class:`~.targets.Inputs` (level and clusters).
        raters: the rater columns (a cell may hold several comma-separated votes).
        questions: (R,) the bootstrap's cluster of each row.
        resamples: bootstrap resamples.
        seed: the bootstrap's seed.

    Returns:
        Three :class:`~.targets.TargetEstimate` rows of ``alpha (<raters>)`` (alpha <= 1).
    """
    target = f"{BEYOND_CHANCE}alpha ({', '.join(raters)})"
    counts = rating_counts(table, raters)
    if len(raters) < 2 and not (counts.sum(1) >= 2).any():
        why = f"one rater: column {raters[0]!r} holds at most one rating per row (alpha needs 2 raters)"
        return [TargetEstimate(target, not_estimable(e, inp.level, 0, 0, why)) for e in (DELTA, BOOTSTRAP, PPI_DELTA)]
    delta = alpha_delta(counts, inp.level, inp.clusters)
    boot = alpha_bootstrap(counts, inp.level, questions, resamples=resamples, seed=seed)
    ppi = not_estimable(PPI_DELTA, inp.level, delta.n_labelled, delta.n_unlabelled, ALPHA_NO_PPI)
    return [TargetEstimate(target, e) for e in (delta, boot, ppi)]


def beyond_chance(table: pd.DataFrame, inp: Inputs, raters: tuple[str, ...] = (), resamples: int = 1000,
                  seed: int = 0, cluster_by: str | None = None) -> list[TargetEstimate]:  # fmt: skip
    """Kappa (judge vs human) and alpha (``raters``) with their intervals; under a label plan, not estimable.

    Args:
        table: the comparison table, R rows.
        inp: its :class:`~.targets.Inputs`.
        raters: alpha's rater columns (empty: :func:`default_raters`).
        resamples: bootstrap resamples.
        seed: the bootstrap's seed.
        cluster_by: the cluster column (the bootstrap's clusters; else the question), or None.

    Returns:
        Three kappa rows and three alpha rows (:data:`.chance.DELTA`, :data:`.chance.BOOTSTRAP`,
        :data:`.chance.PPI_DELTA`).
    """
    raters = tuple(raters) or default_raters(table)
    if inp.probability is not None:
        why = "with a label plan (weighted kappa / alpha not implemented: the labelled rows are no random sample)"
        target = f"{BEYOND_CHANCE}alpha ({', '.join(raters)})"
        return [TargetEstimate(t, not_estimable(e, inp.level, int(inp.labelled.sum()), int(inp.unlabelled.sum()), why))
                for t in (KAPPA, target) for e in (DELTA, BOOTSTRAP, PPI_DELTA)]  # fmt: skip
    questions = question_clusters(table, cluster_by)
    return kappa_rows(inp, questions, resamples, seed) + alpha_rows(table, inp, raters, questions, resamples, seed)
