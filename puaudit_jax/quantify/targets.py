"""The quantities an evaluation exists for, each estimated three ways (:mod:`.estimators`).

Every row of a comparison table with a judge verdict (A, B or tie) takes part: labelled when the
human verdict is A, B or tie, unlabelled when it is missing. Ties count one half.

- ``agreement m``: P(judge verdict == human verdict), the seed's mass; only labelled items say it
  (human only; a judge cannot estimate its own agreement).
- ``share of A wins``: P(response A is better) (ties 1/2), outcome of the human (Y) and of the
  judge (Yhat).
- ``win rate: <model>``: P(<model>'s response is better) over the comparisons it is in, for tables
  that name the models (``model_a`` / ``model_b`` columns: MT-Bench, LLMFAO, a user's). A model
  with fewer than 2 labelled comparisons gets "not estimable" rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from ..datasets.verdicts import MISSING, TIE, A, B
from .estimators import Estimate, check_level, human_only, judge_only, ppi_mean

MODEL_COLUMNS = ("model_a", "model_b")


@dataclass(frozen=True)
class TargetEstimate:
    """One (target, estimator) row: the target's name and the :class:`Estimate`."""

    target: str
    estimate: Estimate

    def to_dict(self) -> dict:
        return {"target": self.target, **asdict(self.estimate)}

    @classmethod
    def from_dict(cls, data: dict) -> TargetEstimate:
        fields = {k: (np.nan if v is None and k in ("estimate", "lower", "upper") else v) for k, v in data.items()}
        return cls(fields.pop("target"), Estimate(**fields))


def _score(verdicts: np.ndarray, side) -> np.ndarray:
    """(n,) 1 where the verdict prefers ``side`` ("A" or "B", or an (n,) array of them), 1/2 for a
    tie, 0 otherwise."""
    return np.where(verdicts == side, 1.0, np.where(verdicts == TIE, 0.5, 0.0))


def _three_ways(target: str, y, yhat_lab, yhat_unl, level: float, clusters=None) -> list[TargetEstimate]:
    """``clusters``: (labelled, unlabelled) cluster labels or None."""
    lab_clusters = None if clusters is None else clusters[0]
    return [TargetEstimate(target, e) for e in (judge_only(yhat_lab, yhat_unl, level, clusters),
                                                human_only(y, level, len(yhat_unl), lab_clusters),
                                                ppi_mean(y, yhat_lab, yhat_unl, level, clusters=clusters))]  # fmt: skip


def cluster_labels(table: pd.DataFrame, column: str | None) -> np.ndarray | None:
    """(n,) str cluster of every row from ``column`` (None: no clustering); a missing value on a
    usable row is an error naming it."""
    if column is None:
        return None
    if column not in table.columns:
        raise ValueError(f"cluster_by={column!r} is not a column of the comparisons (columns: {list(table.columns)})")
    lab, unl = usable_rows(table)
    missing = table[column].isna().to_numpy() & (lab | unl)
    if missing.any():
        ids = table.loc[missing, "id"].astype(str).tolist()[:3]
        raise ValueError(f"cluster column {column!r} is missing on rows {ids}")
    return table[column].astype(str).to_numpy()


def usable_rows(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(labelled, unlabelled) row masks: a judge verdict and a human one (A/B/tie) or none."""
    judge, human = table["judge"].to_numpy(dtype=object), table["human"].to_numpy(dtype=object)
    has_judge = np.isin(judge, (A, B, TIE))
    return has_judge & np.isin(human, (A, B, TIE)), has_judge & (human == MISSING)


def agreement(table: pd.DataFrame, level: float, clusters=None) -> list[TargetEstimate]:
    lab, unl = usable_rows(table)
    y = (table["judge"].to_numpy(dtype=object)[lab] == table["human"].to_numpy(dtype=object)[lab]).astype(float)
    lab_clusters = None if clusters is None else clusters[lab]
    return [TargetEstimate("agreement m", human_only(y, level, int(unl.sum()), lab_clusters))]


def a_share(table: pd.DataFrame, level: float, clusters=None) -> list[TargetEstimate]:
    lab, unl = usable_rows(table)
    judge, human = table["judge"].to_numpy(dtype=object), table["human"].to_numpy(dtype=object)
    pairs = None if clusters is None else (clusters[lab], clusters[unl])
    return _three_ways("share of A wins", _score(human[lab], A), _score(judge[lab], A), _score(judge[unl], A), level,
                       pairs)  # fmt: skip


def win_rates(table: pd.DataFrame, level: float, clusters=None) -> list[TargetEstimate]:
    """Per model named in ``model_a`` / ``model_b``: its win rate three ways (sorted by name)."""
    missing = [c for c in MODEL_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"per-model win rates need the columns {list(MODEL_COLUMNS)}; missing {missing}")
    lab, unl = usable_rows(table)
    judge, human = table["judge"].to_numpy(dtype=object), table["human"].to_numpy(dtype=object)
    ma, mb = table["model_a"].astype(str).to_numpy(), table["model_b"].astype(str).to_numpy()
    rows = []
    for model in sorted(set(ma[lab | unl]) | set(mb[lab | unl])):
        side = np.where(ma == model, A, np.where(mb == model, B, ""))
        li, ui = lab & (side != ""), unl & (side != "")
        pairs = None if clusters is None else (clusters[li], clusters[ui])
        rows += _three_ways(f"win rate: {model}", _score(human[li], side[li]), _score(judge[li], side[li]),
                            _score(judge[ui], side[ui]), level, pairs)  # fmt: skip
    return rows


@dataclass(frozen=True)
class QuantifyConfig:
    """Settings of :func:`quantify` (the CLI's options are generated from them).

    Fields:
        level: coverage of the confidence intervals, in (0, 1)
        cluster_by: column grouping rows that share texts (e.g. prompt): cluster-robust intervals
    """

    level: float = 0.9
    cluster_by: str | None = None


@dataclass(frozen=True)
class SampleCheck:
    """Is the labelled share the same in every question type? PPI++ (and the human-only estimate of
    a pool mean) assume the labelled items are a random sample of all items; a share that differs
    across types (chi-square test of independence, ``p_value``) says they are not.
    ``shares``: type -> (items, labelled share); ``warning``: a sentence when p < ``alpha``."""

    shares: dict
    p_value: float | None
    alpha: float = 0.01

    @property
    def warning(self) -> str:
        if self.p_value is None or self.p_value >= self.alpha:
            return ""
        return (f"the labelled share differs across question types (chi-square p = {self.p_value:.2g}): the "
                "labelled items are not a random sample of the pool, which PPI++ and the human-only "
                "estimates of pool means assume")  # fmt: skip

    def to_dict(self) -> dict:
        return {"shares": {k: list(v) for k, v in self.shares.items()}, "p_value": self.p_value,
                "alpha": self.alpha, "warning": self.warning}  # fmt: skip


def sample_check(table: pd.DataFrame) -> SampleCheck:
    """:class:`SampleCheck` of the usable rows of ``table`` by ``question_type`` (None p-value when
    there is one type or no unlabelled item)."""
    from scipy.stats import chi2_contingency

    from ..datasets.verdicts import question_types

    lab, unl = usable_rows(table)
    types = question_types(table["question_type"]) if "question_type" in table else np.full(len(table), "all")
    used = lab | unl
    names = sorted(set(types[used]))
    counts = np.array([[int((lab & (types == t)).sum()), int((unl & (types == t)).sum())] for t in names])
    shares = {t: (int(c.sum()), float(c[0] / c.sum())) for t, c in zip(names, counts)}
    if len(names) < 2 or counts[:, 1].sum() == 0 or counts[:, 0].sum() == 0:
        return SampleCheck(shares, None)
    return SampleCheck(shares, float(chi2_contingency(counts)[1]))


@dataclass(frozen=True)
class Quantification:
    """Every target's estimates at ``level``; :meth:`to_frame` is the leaderboard table; ``check``:
    the random-sample check of the labelled items (:class:`SampleCheck`)."""

    rows: tuple[TargetEstimate, ...]
    level: float
    check: SampleCheck | None = None
    cluster_by: str | None = None

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.rows])


def quantify(table: pd.DataFrame, *, level: float = QuantifyConfig.level,
             cluster_by: str | None = QuantifyConfig.cluster_by) -> Quantification:  # fmt: skip
    """Agreement m, the share of A wins and (when the table names the models) per-model win rates,
    each by the judge alone, the humans alone and PPI++ (module docstring)."""
    level = check_level(level)
    clusters = cluster_labels(table, cluster_by)
    rows = agreement(table, level, clusters) + a_share(table, level, clusters)
    if all(c in table.columns for c in MODEL_COLUMNS):
        rows += win_rates(table, level, clusters)
    return Quantification(tuple(rows), level, sample_check(table), cluster_by)


def write_quantification(result: Quantification, folder, *, data: str) -> list[str]:
    """leaderboard.csv and leaderboard.json (with the level and the data's name) in ``folder``."""
    from pathlib import Path

    from ..outputs import write_csv, write_json

    frame = result.to_frame()
    write_csv(frame, Path(folder) / "leaderboard.csv")
    check = None if result.check is None else result.check.to_dict()
    write_json({"data": data, "level": result.level, "cluster_by": result.cluster_by, "random_sample_check": check,
                "rows": frame.to_dict(orient="records")}, Path(folder) / "leaderboard.json")  # fmt: skip
    return ["leaderboard.csv", "leaderboard.json"]


AUDIT_PPI = "ppi++ (audit)"


def audit_agreement(items: pd.DataFrame, level: float = QuantifyConfig.level) -> tuple[TargetEstimate, ...]:
    """The agreement m = P(judge == human) on an audit's usable rows (verdicts A/B), human only, and
    -- when a calibrated rule gave P(judge wrong) -- PPI++ with 1 - P(judge wrong) as the prediction:
    out of fold for the labelled rows, so no labelled item predicts itself (cross-prediction,
    Zrnic & Candes 2024), from the calibrated map for the pool. ``items``: an audit's items table."""
    level = check_level(level)
    status, role = items["status"].to_numpy(), items["role"].to_numpy()
    lab, pool = status == "labelled", role == "U"
    y = (items["judge"].to_numpy(dtype=object) == items["human"].to_numpy(dtype=object))[lab].astype(float)
    rows = [TargetEstimate("agreement m", human_only(y, level, int(pool.sum())))]
    p_wrong = items["p_wrong"].to_numpy(float)
    scored = np.isfinite(p_wrong[lab])
    if scored.any() and np.isfinite(p_wrong[pool]).all():
        est = ppi_mean(y[scored], 1 - p_wrong[lab][scored], 1 - p_wrong[pool], level)
        note = est.note or ("" if scored.all() else f"{int((~scored).sum())} unscored labelled rows left out")
        rows.append(TargetEstimate("agreement m", replace(est, estimator=AUDIT_PPI, note=note)))
    return tuple(rows)
