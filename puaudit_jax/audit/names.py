"""The names an audit's settings choose from: evidence kinds, cross-fitted features, scorers and rules.

Plain tuples, importable without any numerical library, so that the settings' dataclasses
(:mod:`.config`) and the ``puaudit`` parser read them without loading the audit. The registries
they name are :data:`~.scorers.SCORERS` and :data:`~.rules.RULES` (a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Sequence

EVIDENCE_KINDS = ("embedding", "style", "swapped", "confidence", "others")
FEATURES = ("score", "two-sided")
SCORER_NAMES = ("pot", "pot-exact", "ot-balanced", "ot-unbalanced", "centroid", "knn", "pu-logistic")
RULE_NAMES = ("seed", "budget", "none", "calibrated", "calibrated-platt", "two-sided", "two-sided-platt", "evidence")


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    """``kinds`` as a tuple, each one of :data:`EVIDENCE_KINDS` (ValueError naming the others)."""
    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in EVIDENCE_KINDS]
    if unknown:
        raise ValueError(f"unknown evidence {unknown}; use some of {', '.join(EVIDENCE_KINDS)}")
    return kinds
