"""UDA (UDA): scores from pairwise verdicts and consensus alignment of several judges.

- :mod:`.bradley_terry`: Bradley-Terry maximum likelihood (Newton, ties as half wins or Davidson),
  Elo scale, bootstrap intervals, clear errors for non-identifiable comparison graphs.
- :mod:`.elo`: online Elo with a K factor over shuffled orders.
- :mod:`.matrices`: judges x models score matrices from a long verdict table with a ``judge`` column;
  the bundled LLMFAO and MT-Bench verdicts in that form.
- :mod:`.metrics`: consensus, per-judge Pearson / MSE / Kendall, inter-judge std, aggregate bias.
- :mod:`.alignment`: the appendix's objective, the Flax adapter, the idealised shrinkage.
- :mod:`.runs`: the runs behind ``puaudit consensus`` (score matrices, alignment), written to a folder.
- :mod:`.plots`: figures. The command itself is :mod:`puaudit_jax.cli.consensus`.
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "AlignConfig",
    "AlignResult",
    "BTConfig",
    "BTResult",
    "BootstrapResult",
    "ComparisonGraphError",
    "EloConfig",
    "EloResult",
    "ScoreMatrices",
    "aggregate_bias",
    "align",
    "bootstrap_bt",
    "consensus",
    "fit_bt",
    "fit_shrinkage",
    "inter_judge_std",
    "judge_metrics",
    "llmfao_verdicts",
    "mtbench_verdicts",
    "online_elo",
    "score_matrices",
    "self_preference_flags",
    "shrink",
    "summary",
    "theorem2_bound",
    "tradeoff_curve",
    "verdicts_from_comparisons",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        ".config": ("AlignConfig", "BTConfig", "EloConfig"),
        ".alignment": (
            "AlignResult",
            "align",
            "fit_shrinkage",
            "self_preference_flags",
            "shrink",
            "theorem2_bound",
            "tradeoff_curve",
        ),
        ".bradley_terry": ("BootstrapResult", "BTResult", "ComparisonGraphError", "bootstrap_bt", "fit_bt"),
        ".elo": ("EloResult", "online_elo"),
        ".matrices": (
            "ScoreMatrices",
            "llmfao_verdicts",
            "mtbench_verdicts",
            "score_matrices",
            "verdicts_from_comparisons",
        ),
        ".metrics": ("aggregate_bias", "consensus", "inter_judge_std", "judge_metrics", "summary"),
    },
)
