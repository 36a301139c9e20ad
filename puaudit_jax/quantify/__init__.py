"""Quantification with confidence intervals (issue 17; DESIGN "Quantification"): judge-human
agreement, the share of A wins and per-model win rates, each by the judge alone (biased, for
contrast), the human labels alone, and prediction-powered inference (PPI++) that uses the judge's
verdicts on the unlabelled items without trusting them.

``estimators.py``: the three mean estimators and their intervals; ``targets.py``: the targets and
:func:`quantify`.
"""

from .estimators import HUMAN_ONLY, JUDGE_ONLY, PPI, Estimate, human_only, judge_only, ppi_lambda, ppi_mean
from .targets import (
    AUDIT_PPI,
    Quantification,
    QuantifyConfig,
    TargetEstimate,
    audit_agreement,
    quantify,
    write_quantification,
)

__all__ = [
    "AUDIT_PPI", "HUMAN_ONLY", "JUDGE_ONLY", "PPI", "Estimate", "Quantification", "QuantifyConfig", "TargetEstimate",
    "audit_agreement", "human_only", "judge_only", "ppi_lambda", "ppi_mean", "quantify", "write_quantification",
]  # fmt: skip
