"""Data layer: the comparison table, the readers of the field's formats, the bundled real sets, exclusions.

The comparison table (schema, validation), the readers of the field's file formats (one registry,
:mod:`.formats`), the bundled real sets, the status / exclusion report of every comparison, and
loaders of the other bundled data.

The data files themselves are package data under ``puaudit_jax/data/`` (this package is named
``datasets`` so that the code and the data folder do not share a name).
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "BUNDLED",
    "CORE_COLUMNS",
    "EVIDENCE_COLUMNS",
    "FORMATS",
    "STYLE_FEATURES",
    "Comparison",
    "ComparisonValidationError",
    "Read",
    "ReadConfig",
    "ReadReport",
    "ValidationProblem",
    "aggregate_votes",
    "agreement",
    "comparisons_to_frame",
    "conversation",
    "data_path",
    "exclusion_counts",
    "exclusions",
    "item_status",
    "join_labels",
    "load_bundled",
    "load_comparisons",
    "load_data",
    "load_hh_rlhf",
    "load_judgebench",
    "load_judgebench_pairs",
    "load_llmfao",
    "load_mtbench",
    "load_uda_scores",
    "load_usr_topicalchat",
    "normalize_verdict",
    "other_judge_verdicts",
    "read_comparisons",
    "read_data",
    "reference_path",
    "save_comparisons",
    "score_matrix",
    "style_counts",
    "style_differences",
    "summarize",
    "validate_comparisons",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        ".bundled": ("load_bundled", "load_data", "read_data"),
        ".formats": ("FORMATS", "join_labels", "load_comparisons", "read_comparisons"),
        ".read_config": ("ReadConfig",),
        ".reading": ("Read", "ReadReport"),
        ".names": ("BUNDLED", "STYLE_FEATURES"),
        ".comparisons": (
            "CORE_COLUMNS",
            "EVIDENCE_COLUMNS",
            "Comparison",
            "ComparisonValidationError",
            "ValidationProblem",
            "comparisons_to_frame",
            "conversation",
            "other_judge_verdicts",
            "save_comparisons",
            "validate_comparisons",
        ),
        ".exclusions": ("exclusion_counts", "exclusions", "item_status"),
        ".hh_rlhf": ("load_hh_rlhf",),
        ".judgebench": ("load_judgebench", "load_judgebench_pairs"),
        ".llmfao": ("load_llmfao",),
        ".mtbench": ("load_mtbench",),
        ".paths": ("data_path", "reference_path"),
        ".style": ("style_counts", "style_differences"),
        ".summary": ("agreement", "summarize"),
        ".uda": ("load_uda_scores", "score_matrix"),
        ".usr": ("load_usr_topicalchat",),
        ".verdicts": ("normalize_verdict",),
        ".votes": ("aggregate_votes",),
    },
)
