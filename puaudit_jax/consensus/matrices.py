"""Judge x model score matrices from pairwise verdicts of several judges.

The verdict table of this package is long: one row per (judge, comparison) with columns
``judge`` (the judge's *name*), ``model_a``, ``model_b``, ``winner`` (A | B | tie), optional ``weight``.
(In the project's comparison tables ``judge`` holds the verdict; :func:`verdicts_from_comparisons`
converts such a table, for one named judge, into this form.)

:func:`score_matrices` fits Bradley-Terry (or online Elo) per judge on a common model list and
returns the judges x models matrix of Elo points (rows = judges in first-seen order, columns =
models), the per-judge fits, and bootstrap intervals on request.

Bundled real sets in this form: :func:`llmfao_verdicts` (crowd, GPT-4, GPT-3.5 on the 2,139 crowd
pairs over 59 models) and :func:`mtbench_verdicts` (MT-Bench expert/author votes and GPT-4 over 6
models). Rows that cannot enter a Bradley-Terry fit (a missing verdict) are excluded with a count
kept in ``table.attrs["excluded"]`` -- never silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from puaudit_runtime.checks import check_int

from ..datasets import data_path, load_bundled, normalize_verdict
from ..datasets.verdicts import MISSING
from .bradley_terry import BTConfig, bootstrap_bt, fit_bt
from .elo import EloConfig, online_elo

VERDICT_COLUMNS = ("judge", "model_a", "model_b", "winner")


def verdicts_from_comparisons(table: pd.DataFrame, judge_name: str, *, verdict_col: str = "judge") -> pd.DataFrame:
    """Long verdicts of one judge named ``judge_name`` from a comparison table.

    Missing verdicts are excluded; their count is in ``attrs["excluded"]``.

    Args:
        table: the comparison table (columns ``model_a``, ``model_b`` and ``verdict_col``).
        judge_name: the judge's name, the ``judge`` column of the result.
        verdict_col: the column of verdicts in A | B | tie | missing.

    Returns:
        Columns judge, model_a, model_b, winner: one row per row with a verdict.

    Raises:
        ValueError: a missing column.
    """
    for col in ("model_a", "model_b", verdict_col):
        if col not in table.columns:
            raise ValueError(f"comparison table lacks column {col!r}")
    verdict = table[verdict_col].astype(str)
    missing = verdict == MISSING
    out = pd.DataFrame(
        {
            "judge": judge_name,
            "model_a": table.loc[~missing, "model_a"].astype(str).to_numpy(),
            "model_b": table.loc[~missing, "model_b"].astype(str).to_numpy(),
            "winner": verdict[~missing].to_numpy(),
        }
    )
    out.attrs["excluded"] = {judge_name: {"missing verdict": int(missing.sum())}} if missing.any() else {}
    return out


def table_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Long verdicts of every judge of a comparison table read from any format.

    The ``judge`` column (named by its ``judge_model`` when the table has one name there, or one model
    before a "/" as FastChat writes ``gpt-4/pair-v2``; else "judge"),
    each ``other_<name>`` column (other judges, as the AlpacaEval reader names them) as judge ``<name>``,
    and ``human`` as judge "human" when any row is labelled. Missing verdicts are excluded and counted.

    Args:
        table: a comparison table with model_a and model_b.
    """
    names = {str(n) for n in table["judge_model"].dropna().unique()} if "judge_model" in table.columns else set()
    models = {n.split("/")[0] for n in names}  # FastChat: "gpt-4/pair-v2", "gpt-4/pair-math-v1" are gpt-4
    name = names.pop() if len(names) == 1 else models.pop() if len(models) == 1 else "judge"
    parts = [verdicts_from_comparisons(table, name)]
    for column in (c for c in table.columns if str(c).startswith("other_")):
        parts.append(verdicts_from_comparisons(table, str(column).removeprefix("other_"), verdict_col=column))
    if (table["human"] != MISSING).any():
        parts.append(verdicts_from_comparisons(table, "human", verdict_col="human"))
    return _concat(parts)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    out = pd.concat(parts, ignore_index=True)
    out.attrs["excluded"] = {k: v for p in parts for k, v in p.attrs.get("excluded", {}).items()}
    return out


def llmfao_verdicts(crowd: str = "votes") -> pd.DataFrame:
    """LLMFAO verdicts of three judges on the 2,139 crowd-voted pairs (59 models).

    crowd="votes": every one of the 8,931 crowd votes is a comparison of judge "crowd" (left -> A,
    right -> B), read from ``crowd-comparisons.csv``; crowd="plurality": one verdict per pair, the
    project's plurality aggregation (``human`` of :func:`load_bundled`). Judges "gpt4" and "gpt3"
    (GPT-3.5): one verdict per pair. Model names are the LLMFAO display names.
    """
    gpt = {name: load_bundled(f"llmfao-{name}") for name in ("gpt4", "gpt3")}
    parts = []
    if crowd == "votes":
        raw = pd.read_csv(data_path("llmfao", "crowd-comparisons.csv"), keep_default_na=False)
        winner = [normalize_verdict(w, allow_missing=False) for w in raw["winner"]]
        parts.append(
            pd.DataFrame(
                {
                    "judge": "crowd",
                    "model_a": raw["left"].astype(str),
                    "model_b": raw["right"].astype(str),
                    "winner": winner,
                }
            )
        )
    elif crowd == "plurality":
        parts.append(verdicts_from_comparisons(gpt["gpt4"], "crowd", verdict_col="human"))
    else:
        raise ValueError(f"crowd must be 'votes' or 'plurality', got {crowd!r}")
    for name, table in gpt.items():
        parts.append(verdicts_from_comparisons(table, name))
    return _concat(parts)


def mtbench_verdicts() -> pd.DataFrame:
    """MT-Bench: judge "human" (expert/author votes, aggregated per item) and judge "gpt4" over 6 models.

    The 8 items without a human vote are excluded from the human judge (counted in attrs).
    """
    table = load_bundled("mtbench")
    return _concat(
        [verdicts_from_comparisons(table, "human", verdict_col="human"), verdicts_from_comparisons(table, "gpt4")]
    )


@dataclass(frozen=True)
class ScoreMatrices:
    """Per-judge scores of every model, with the fits behind them.

    Attributes:
        scores: judges x models Elo points.
        fits: per-judge BTResult / EloResult.
        intervals: per judge a BootstrapResult table (model, elo, lo, hi, se) when asked.
        method: "bt" or "elo".
        config: the config used.
        excluded: per judge, the rows left out and why (from the verdicts' ``attrs["excluded"]``).
    """

    scores: pd.DataFrame
    fits: dict
    intervals: dict = field(default_factory=dict)
    method: str = "bt"
    config: object = None
    excluded: dict = field(default_factory=dict)


def score_matrices(
    verdicts: pd.DataFrame,
    *,
    method: str = "bt",
    bt: BTConfig = BTConfig(),
    elo: EloConfig = EloConfig(),
    models: list[str] | None = None,
    n_boot: int = 0,
    seed: int = 0,
) -> ScoreMatrices:
    """Fit each judge of a long verdict table on one model list.

    A judge that never compared some model raises unless ``bt.ridge > 0``.

    Args:
        verdicts: long verdicts (columns judge, model_a, model_b, winner in A | B | tie).
        method: "bt" (Bradley-Terry, :class:`BTConfig`) or "elo" (online Elo, :class:`EloConfig`).
        bt: the Bradley-Terry settings.
        elo: the Elo settings.
        models: the models' order (None: all models, first seen).
        n_boot: > 0 adds percentile bootstrap intervals (BT only; seed ``seed + judge position``);
            0 for none.
        seed: the bootstrap's numpy seed (>= 0).

    Returns:
        The :class:`ScoreMatrices` (judges x models scores in Elo points, the intervals and fits).

    Raises:
        ValueError: ``n_boot`` not an integer >= 0 or ``seed`` not one (checked before any fit), an
            unknown method, missing columns, or a judge's bad or non-identifiable comparisons.
    """
    check_int("n_boot", n_boot, 0, "bootstrap resamples; 0 = no intervals")
    check_int("seed", seed, 0, "numpy seed")
    missing = [c for c in VERDICT_COLUMNS if c not in verdicts.columns]
    if missing:
        raise ValueError(f"verdict table lacks columns {missing} (need {list(VERDICT_COLUMNS)})")
    if method not in ("bt", "elo"):
        raise ValueError(f"method must be 'bt' or 'elo', got {method!r}")
    if models is None:
        models = list(dict.fromkeys(pd.concat([verdicts["model_a"], verdicts["model_b"]]).astype(str)))
    fits, intervals, rows = {}, {}, {}
    for k, (judge, part) in enumerate(verdicts.groupby("judge", sort=False)):
        try:
            if method == "bt":
                fits[judge] = fit_bt(part, bt, models=models)
                if n_boot:
                    intervals[judge] = bootstrap_bt(part, bt, n_boot=n_boot, seed=seed + k, models=models).table
            else:
                fits[judge] = online_elo(part, elo, models=models)
        except ValueError as err:
            raise type(err)(f"judge {judge!r}: {err}") from err
        rows[judge] = fits[judge].scores
    scores = pd.DataFrame(rows).T.loc[:, models]
    scores.index.name, scores.columns.name = "judge", "model"
    return ScoreMatrices(
        scores, fits, intervals, method, bt if method == "bt" else elo, dict(verdicts.attrs.get("excluded", {}))
    )
