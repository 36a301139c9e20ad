"""The paper's evaluation protocol: hidden labels, repeated splits, Cons_orig / Cons_adj.

============================  ================================================================
``splits.py``                 :func:`split_labels`: hide most labels of each question type
``protocol.py``               :func:`evaluate`, :func:`sweep`, :class:`Protocol`, the pairs compared
``consistency.py``            what is measured on the hidden labels; the hindsight ceiling
``memory.py``                 peak memory of a run
``tables.py``                 text tables (the summary; ours beside the paper's Table 5)
``demo.py``                   ``puaudit demo``: the default audit beside the paper's, on MT-Bench
``plots.py``                  Figure 3 (radar of Cons_orig / Cons_adj per question type)
``write.py``                  results.csv / .json and per_seed.csv, written atomically
============================  ================================================================
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "ALL",
    "DEFAULT_PAIRS",
    "EvalResult",
    "PeakMemory",
    "Protocol",
    "LabelSplit",
    "consistency",
    "demo_table",
    "evaluate",
    "hindsight_flips",
    "overall_table",
    "pairs_by_scorer",
    "reapply_rule",
    "split_labels",
    "summarize_runs",
    "summary_table",
    "sweep",
    "write_evaluation",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        ".config": ("DEFAULT_PAIRS", "Protocol"),
        ".consistency": ("ALL", "consistency", "hindsight_flips"),
        ".memory": ("PeakMemory",),
        ".protocol": ("EvalResult", "evaluate", "pairs_by_scorer", "reapply_rule", "summarize_runs", "sweep"),
        ".splits": ("LabelSplit", "split_labels"),
        ".tables": ("demo_table", "overall_table", "summary_table"),
        ".write": ("write_evaluation",),
    },
)
