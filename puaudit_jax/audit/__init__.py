"""PUAudit (seed 000 §3, Appendix A.4, Algorithm 1): the audit as a chain of typed stages.

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
``guarantee.py``              with ``guarantee``: trust, flip or escalate each verdict (:class:`Guarantee`)
``report.py``                 :class:`AuditReport`, its versioned JSON (report.json) and text
``write.py``                  items.csv / items.parquet / report.json written to a folder
``pipeline.py``               :func:`run_audit` / :func:`audit`: the chain, :class:`AuditResult`
============================  ================================================================
"""

from ..datasets.verdicts import NO_TYPE, flip_verdict
from .config import DEFAULT_RULE, DEFAULT_SCORER, SEED_RULE, SEED_SCORER, AuditConfig
from .crossfit import CrossfitSummary, crossfit
from .decide import apply_rule, with_flips
from .guarantee import Guarantee
from .mass import MassEstimate, estimate_m
from .orient import Oriented, orient
from .pipeline import ITEM_COLUMNS, ROLES, AuditResult, audit, items_table, roles, run_audit
from .prepare import ZERO_DIFF, AuditData, prepare
from .references import POOLED_TYPE, DenoisingGroup, References, references
from .report import FORMAT_VERSION, AuditReport, Counts, HiddenLabels
from .score import Scores, ScoringGroup, score
from .write import write_result

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
    "SEED_RULE",
    "SEED_SCORER",
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
