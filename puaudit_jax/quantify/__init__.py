"""Quantification with confidence intervals: agreement, A-win share, win rates and the Bradley-Terry leaderboard.

Judge-human agreement, the share of A wins, per-model win rates and the Bradley-Terry leaderboard, each
by the judge alone (biased, for contrast), the human labels alone, and prediction-powered inference (PPI++)
that uses the judge's verdicts -- or an audit's expected human verdicts -- on the unlabelled items
without trusting them; and for each share, how far off the judge's own number is (``judge bias:``
rows, judge - human on the labelled items, :func:`judge_bias`).

``estimators.py``: the mean estimators and their intervals; ``m_estimation.py``: PPI++ logistic
M-estimation (vmappable); ``leaderboard.py``: Bradley-Terry on the Elo scale, raw and
style-controlled; ``ranks.py``: simultaneous rank-sets; ``targets.py``: the targets and the
predictions; ``active.py``: inverse-probability-weighted (active) estimators and sampling
probabilities; ``plan.py``: :func:`plan_labels`, which items to label next; ``sample_check.py``: is
the labelled set a random sample?; ``chance.py``: agreement beyond chance, Cohen's kappa and
Krippendorff's alpha with delta-method, cluster-bootstrap and PPI++ intervals; ``raters.py``: their
raters (columns, several votes per cell) and rows; ``pipeline.py``: :func:`quantify` and the leaderboard files;
``robustness.py``: how many comparisons must be dropped to change the #1;
``coverage.py``: the coverage study; ``plots.py``: the forest plot and the plan's power curve. The
audit's predictions for PPI++ come from :mod:`puaudit_jax.audit.predictions` (this package never
imports the audit).

``monitoring.py``: :func:`monitor`, the judge's agreement followed as labels arrive, anytime-valid (the
betting maths in ``betting.py``, the settings in ``monitor_config.py``).
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "AUDIT_PPI", "ESTIMATORS", "HUMAN_ONLY", "JUDGE_BIAS", "JUDGE_ONLY", "PPI", "STRATIFIED", "Estimate",
    "LabelPlanReport", "MFit", "PlanConfig", "Quantification", "QuantifyConfig", "RankSets", "Robustness",
    "RobustnessRow", "TargetEstimate",
    "audit_agreement", "audit_predictions", "human_only", "judge_bias", "judge_only", "plan_labels", "ppi_lambda",
    "ppi_logistic", "ppi_logistic_splits", "ppi_mean", "quantify", "rank_sets", "stratified_ppi_mean",
    "write_quantification", "MonitorConfig", "Monitoring", "monitor", "write_monitoring",
]  # fmt: skip

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        ".config": ("PlanConfig", "QuantifyConfig"),
        ".estimators": (
            "AUDIT_PPI",
            "ESTIMATORS",
            "HUMAN_ONLY",
            "JUDGE_BIAS",
            "JUDGE_ONLY",
            "PPI",
            "STRATIFIED",
            "Estimate",
            "human_only",
            "judge_bias",
            "judge_only",
            "ppi_lambda",
            "ppi_mean",
            "stratified_ppi_mean",
        ),
        ".m_estimation": ("MFit", "ppi_logistic", "ppi_logistic_splits"),
        ".monitoring": ("Monitoring", "monitor", "write_monitoring"),
        ".monitor_config": ("MonitorConfig",),
        ".pipeline": ("Quantification", "quantify", "write_quantification"),
        ".plan": ("LabelPlanReport", "plan_labels"),
        ".ranks": ("RankSets", "rank_sets"),
        ".robustness": ("Robustness", "RobustnessRow"),
        ".targets": ("TargetEstimate", "audit_agreement", "audit_predictions"),
    },
)
