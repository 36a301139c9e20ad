"""Data layer: the comparison table, the bundled real sets, exclusions, and loaders of the other bundled data.

The comparison table (schema, validation, file formats), the bundled real sets, the status / exclusion
report of every comparison, and loaders of the other bundled data.

The data files themselves are package data under ``puaudit_jax/data/`` (this package is named
``datasets`` so that the code and the data folder do not share a name).
"""

from .bundled import BUNDLED, load_bundled, load_data
from .comparisons import (
    CORE_COLUMNS,
    EVIDENCE_COLUMNS,
    Comparison,
    ComparisonValidationError,
    ValidationProblem,
    comparisons_to_frame,
    conversation,
    load_comparisons,
    other_judge_verdicts,
    save_comparisons,
    validate_comparisons,
)
from .exclusions import exclusion_counts, exclusions, item_status
from .hh_rlhf import load_hh_rlhf
from .judgebench import load_judgebench, load_judgebench_pairs
from .llmfao import load_llmfao
from .mtbench import load_mtbench
from .paths import data_path, reference_path
from .style import STYLE_FEATURES, style_counts, style_differences
from .summary import agreement, summarize
from .uda import load_uda_scores, score_matrix
from .usr import load_usr_topicalchat
from .verdicts import normalize_verdict
from .votes import aggregate_votes

__all__ = [
    "BUNDLED",
    "CORE_COLUMNS",
    "EVIDENCE_COLUMNS",
    "STYLE_FEATURES",
    "Comparison",
    "ComparisonValidationError",
    "ValidationProblem",
    "aggregate_votes",
    "agreement",
    "comparisons_to_frame",
    "conversation",
    "data_path",
    "exclusion_counts",
    "exclusions",
    "item_status",
    "load_bundled",
    "load_data",
    "load_comparisons",
    "load_hh_rlhf",
    "load_judgebench",
    "load_judgebench_pairs",
    "load_llmfao",
    "load_mtbench",
    "load_uda_scores",
    "load_usr_topicalchat",
    "normalize_verdict",
    "other_judge_verdicts",
    "reference_path",
    "save_comparisons",
    "score_matrix",
    "style_counts",
    "style_differences",
    "summarize",
    "validate_comparisons",
]
