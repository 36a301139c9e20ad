"""PUAudit (PUAudit §3, Appendix A.4, Algorithm 1): the audit as a chain of typed stages.

Where things happen, one module per stage:

============================  ================================================================
``config.py``                 :class:`AuditConfig`, every knob and its default (the CLI reads it)
``prepare.py``                statuses, exclusions, verdicts and embeddings (:class:`AuditData`)
``mass.py``                   m given or estimated on a holdout (:class:`MassEstimate`)
``orient.py``                 winner-minus-loser unit vectors z (:class:`Oriented`)
``references.py``             P denoised per question type into P' (:class:`References`)
``score.py``                  pool scored against P' by the scorer (:class:`Scores`)
``crossfit.py``               out-of-fold features of the labelled rows (calibrated rules)
``decide.py``                 the rule flips the judge's verdicts (:func:`apply_rule`)
``guarantee/``                the guarantee's pure stages: candidates, tests, roles, cascade, report
``guaranteed.py``             with ``guarantee``: trust, flip or escalate each verdict (:class:`Guarantee`)
``report.py``                 :class:`AuditReport`, its versioned JSON (report.json) and text
``write.py``                  items.csv / items.parquet / report.json written to a folder
``pipeline.py``               :func:`run_audit` / :func:`audit`: the chain, :class:`AuditResult`
============================  ================================================================
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "AuditConfig",
    "AuditData",
    "AuditReport",
    "AuditResult",
    "Counts",
    "CrossfitSummary",
    "DEFAULT_RULE",
    "DEFAULT_SCORER",
    "DenoisingGroup",
    "FORMAT_VERSION",
    "Guarantee",
    "HiddenLabels",
    "ITEM_COLUMNS",
    "MassEstimate",
    "NO_TYPE",
    "Oriented",
    "POOLED_TYPE",
    "ROLES",
    "References",
    "PAPER_RULE",
    "PAPER_SCORER",
    "Scores",
    "ScoringGroup",
    "ZERO_DIFF",
    "apply_rule",
    "audit",
    "crossfit",
    "estimate_m",
    "flip_verdict",
    "items_table",
    "orient",
    "prepare",
    "references",
    "roles",
    "run_audit",
    "score",
    "with_flips",
    "write_result",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "..datasets.verdicts": ("NO_TYPE", "flip_verdict"),
        ".config": ("DEFAULT_RULE", "DEFAULT_SCORER", "PAPER_RULE", "PAPER_SCORER", "AuditConfig"),
        ".crossfit": ("CrossfitSummary", "crossfit"),
        ".decide": ("apply_rule", "with_flips"),
        ".guarantee": ("Guarantee",),
        ".mass": ("MassEstimate", "estimate_m"),
        ".orient": ("Oriented", "orient"),
        ".pipeline": ("ITEM_COLUMNS", "ROLES", "AuditResult", "audit", "items_table", "roles", "run_audit"),
        ".prepare": ("ZERO_DIFF", "AuditData", "prepare"),
        ".references": ("POOLED_TYPE", "DenoisingGroup", "References", "references"),
        ".report": ("FORMAT_VERSION", "AuditReport", "Counts", "HiddenLabels"),
        ".score": ("Scores", "ScoringGroup", "score"),
        ".write": ("write_result",),
    },
)
