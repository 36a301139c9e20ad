"""The UDA paper's judge x model score matrices (Elo), as a long table and as matrices.

Source: ``puaudit_jax/data/uda/judge_score_matrices.csv`` (the paper's appendix's Tables 5-7; see its
README). Long table columns: ``dataset`` (arenahard | transfer_table6 | transfer_table7),
``matrix`` (baseline | uda | uda_full | uda_ablated_no_self_features | human), ``judge`` (J1-J10,
or "human"), ``model`` (10 models), ``score`` (Elo points, float).
"""

from __future__ import annotations

import pandas as pd

from .paths import data_path

COLUMNS = ("dataset", "matrix", "judge", "model", "score")


def load_uda_scores() -> pd.DataFrame:
    """The long table, validated: all columns present, scores finite, one score per cell."""
    path = data_path("uda", "judge_score_matrices.csv")
    table = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    scores = pd.to_numeric(table["score"], errors="coerce")
    bad = scores.isna() | ~scores.abs().lt(float("inf"))
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise ValueError(f"{path}: line {row + 2}, column 'score': not a finite number: {table['score'].iloc[row]!r}")
    repeated = table.duplicated(["dataset", "matrix", "judge", "model"])
    if repeated.any():
        row = int(repeated.to_numpy().nonzero()[0][0])
        raise ValueError(f"{path}: line {row + 2}: repeated (dataset, matrix, judge, model) cell")
    return table.assign(score=scores.astype("float64"))[list(COLUMNS)]


def score_matrix(scores: pd.DataFrame, dataset: str, matrix: str) -> pd.DataFrame:
    """Judges x models matrix (rows and columns in file order) of one (dataset, matrix).

    Args:
        scores: the long scores (columns dataset, matrix, judge, model, score).
        dataset: the dataset's name.
        matrix: the matrix's name within the dataset.

    Returns:
        The judges x models scores, indexed "judge" / "model".

    Raises:
        KeyError: no such matrix (the available pairs listed).
        ValueError: a missing cell.
    """
    part = scores[(scores["dataset"] == dataset) & (scores["matrix"] == matrix)]
    if part.empty:
        available = sorted(set(zip(scores["dataset"], scores["matrix"])))
        raise KeyError(f"no matrix ({dataset!r}, {matrix!r}); available: {available}")
    table = part.pivot(index="judge", columns="model", values="score")
    table = table.loc[part["judge"].unique(), part["model"].unique()]
    if table.isna().any().any():
        raise ValueError(f"matrix ({dataset!r}, {matrix!r}) has missing cells")
    table.index.name, table.columns.name = "judge", "model"
    return table
