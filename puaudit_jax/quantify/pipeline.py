"""``quantify``: every target by every estimator, the random-sample checks, and the leaderboard files."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from ..datasets.verdicts import MISSING
from .config import BIAS, QuantifyConfig, _check_style  # light, for the CLI
from .plan import planned_probabilities
from .raters import beyond_chance
from .robustness import Robustness, table_robustness, write_robustness
from .sample_check import SampleCheck, sample_check
from .targets import (
    MODEL_COLUMNS,
    TargetEstimate,
    a_share,
    agreement,
    inputs,
    leaderboard,
    style_leaderboard,
    win_rates,
)


@dataclass(frozen=True)
class Quantification:
    """Every target's estimates at ``level``; :meth:`to_frame` is the leaderboard table.

    Attributes:
        rows: one :class:`~puaudit_jax.quantify.targets.TargetEstimate` per (target, estimator).
        level: the intervals' coverage, in (0, 1).
        checks: the random-sample checks of the labelled items (by question type, and by cluster when
            clustered).
        cluster_by: the cluster column, or None.
        no_judge_verdict: rows left out because the judge gave no verdict ("missing": a failed
            request), said in :attr:`warnings`.
        robustness: with ``robustness=True``, how many comparisons must be dropped to change each
            leaderboard's #1 and adjacent pairs (:mod:`.robustness`), else None.
    """

    rows: tuple[TargetEstimate, ...]
    level: float
    checks: tuple[SampleCheck, ...] = ()
    cluster_by: str | None = None
    no_judge_verdict: int = 0
    robustness: Robustness | None = None

    def to_frame(self) -> pd.DataFrame:
        """The leaderboard table: one row per (target, estimator), the estimate's fields as columns."""
        return pd.DataFrame([r.to_dict() for r in self.rows])

    @property
    def judge_bias(self) -> tuple[TargetEstimate, ...]:
        """How far off the judge's numbers are: the "judge bias: <target>" rows (judge - human, with intervals).

        One per share the judge estimates (the share of A wins, each win rate): the judge's outcome minus
        the human's, averaged over the labelled rows; an interval that excludes 0 says the judge-only
        number is off by that much.
        """
        return tuple(r for r in self.rows if r.target.startswith(BIAS))

    @property
    def warnings(self) -> list[str]:
        """The rows left out for want of a judge verdict, and the random-sample checks' warnings."""
        left_out = [f"{self.no_judge_verdict} rows without a judge verdict (judge = missing) left out"]
        return left_out[: bool(self.no_judge_verdict)] + [c.warning for c in self.checks if c.warning]


def quantify(table: pd.DataFrame, *, level: float = QuantifyConfig.level,
             cluster_by: str | None = QuantifyConfig.cluster_by, style: tuple[str, ...] = QuantifyConfig.style,
             audit_items: pd.DataFrame | None = None, plan: pd.DataFrame | None = None,
             raters: tuple[str, ...] = QuantifyConfig.raters, resamples: int = QuantifyConfig.resamples,
             seed: int = QuantifyConfig.seed, robustness: bool = QuantifyConfig.robustness,
             ) -> Quantification:  # fmt: skip
    """Agreement m, the share of A wins, kappa and alpha, and per-model win rates and the Bradley-Terry leaderboard.

    The per-model targets come when the table names the models; each target by every estimator of
    :mod:`.targets`, and for each share the judge estimates, the judge's bias ("judge bias: <target>",
    :attr:`Quantification.judge_bias`); agreement beyond chance ("beyond chance: kappa (judge vs human)",
    "beyond chance: alpha (<raters>)") by the delta method, the cluster bootstrap and PPI++ (:mod:`.raters`).

    Args:
        table: a validated comparison table (columns ``id``, ``judge``, ``human``; ``question_type``
            stratifies; ``model_a`` / ``model_b`` add the per-model targets).
        level: coverage of the confidence intervals, in (0, 1).
        cluster_by: column grouping rows that share texts (cluster-robust intervals), or None.
        style: style features of the style-controlled leaderboard (names of
            :data:`~puaudit_jax.datasets.style.STYLE_FEATURES`; empty for none).
        audit_items: the items table of a calibrated audit of the same table (adds ``ppi++ (audit)``),
            or None.
        plan: the label plan the newer labels were drawn by (:func:`.plan.plan_labels`'s frame, e.g.
            ``plan.csv``): every planned label is weighted by 1 / its sampling probability
            (:mod:`.active`); the random-sample checks are skipped (the plan is not random by design).
        raters: the columns of the agreement beyond chance, Krippendorff's alpha (:mod:`.raters`;
            empty: the judge and the human votes).
        resamples: bootstrap resamples of the kappa and alpha intervals.
        seed: the bootstrap's random seed.
        robustness: also count the comparisons whose removal changes each leaderboard's #1 and adjacent
            pairs (:func:`.robustness.table_robustness`: first-order influence confirmed by refit).

    Returns:
        The :class:`Quantification` (win rates and shares in [0, 1], leaderboard scores in Elo points).

    Raises:
        ValueError: a bad level, an unknown or repeated style feature, a missing cluster column or value,
            audit items that do not match the table, or a plan that does not (:func:`.plan.planned_probabilities`).
    """
    _check_style(tuple(style))
    unjudged = int((table["judge"].to_numpy(dtype=object) == MISSING).sum())
    if unjudged == len(table):
        raise ValueError(f"none of the {len(table)} rows has a judge verdict (every judge cell is missing)")
    inp = inputs(table, level, cluster_by, audit_items)
    if plan is not None:
        inp = replace(inp, probability=planned_probabilities(table, plan))
    rows = agreement(inp) + a_share(inp) + beyond_chance(table, inp, tuple(raters), resamples, seed, cluster_by)
    if all(c in table.columns for c in MODEL_COLUMNS):
        rows += win_rates(table, inp) + leaderboard(table, inp) + style_leaderboard(table, inp, tuple(style))
    checks = [sample_check(inp.strata, inp.labelled, inp.unlabelled, "question_type")] if inp.strata is not None else []
    checks = [] if plan is not None else checks
    if inp.clusters is not None and plan is None:
        checks.append(sample_check(inp.clusters, inp.labelled, inp.unlabelled, cluster_by))
    robust = table_robustness(table, inp) if robustness else None
    return Quantification(tuple(rows), inp.level, tuple(checks), cluster_by, unjudged, robust)


def write_quantification(result: Quantification, folder, *, data: str) -> list[str]:
    """Write leaderboard.csv, leaderboard.json (with the level and the data's name) and robustness.csv in ``folder``.

    robustness.csv only when the result has :attr:`Quantification.robustness`.

    Args:
        result: the quantification.
        folder: the output folder.
        data: the data's name, recorded in leaderboard.json.

    Returns:
        The file names written.
    """
    from puaudit_runtime.files import write_csv, write_json

    frame = result.to_frame()
    write_csv(frame, Path(folder) / "leaderboard.csv")
    checks = [c.to_dict() for c in result.checks]
    write_json({"data": data, "level": result.level, "cluster_by": result.cluster_by, "random_sample_checks": checks,
                "no_judge_verdict": result.no_judge_verdict, "rows": frame.to_dict(orient="records")},
               Path(folder) / "leaderboard.json")  # fmt: skip
    robust = [] if result.robustness is None else [write_robustness(result.robustness, folder)]
    return ["leaderboard.csv", "leaderboard.json", *robust]
