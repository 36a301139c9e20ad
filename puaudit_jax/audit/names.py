"""The names an audit's settings choose from: evidence kinds, cross-fitted features, scorers and rules.

Plain tuples, importable without any numerical library, so that the settings' dataclasses
(:mod:`.config`) and the ``puaudit`` parser read them without loading the audit. The registries
they name are :data:`~.scorers.SCORERS` and :data:`~.rules.RULES` (a test keeps the two in step).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

EVIDENCE_KINDS = ("embedding", "style", "swapped", "confidence", "others")
FEATURES = ("score", "two-sided")
SCORER_NAMES = ("pot", "pot-exact", "ot-balanced", "ot-unbalanced", "centroid", "knn", "pu-logistic")
#: Where a candidate's level goes in the guarantee's fallback sequence (:mod:`.guarantee.testing`): all of it on
#: the strictest testable threshold (one fixed sequence, Jung et al.'s), or half there and half on the whole pool.
ONE_SEQUENCE = (("strictest", 1.0),)
STRICTEST_AND_WHOLE = (("strictest", 0.5), (1.0, 0.5))
#: ``AuditConfig.certify``: per setting, the guarantee's candidates as (name, share of delta, where its level
#: goes) (:mod:`.guarantee.candidates`). The first setting is the default, chosen on the bundled sets over 200
#: maskings per cell (results/guarantee.md: the best mean coverage of the exact settings; the label-free
#: candidate's one sequence runs on to the whole pool while its tests pass, so the fitted one spends its share
#: on one sequence too).
CERTIFY = {
    "auto": (("label-free", 0.5, ONE_SEQUENCE), ("fitted", 0.5, ONE_SEQUENCE)),
    "label-free": (("label-free", 1.0, ONE_SEQUENCE),),
    "fitted": (("fitted", 1.0, STRICTEST_AND_WHOLE),),
    "fitted-ppi": (("fitted-ppi", 1.0, STRICTEST_AND_WHOLE),),
    "auto-ppi": (("label-free", 0.5, ONE_SEQUENCE), ("fitted-ppi", 0.5, ONE_SEQUENCE)),
}
RULE_NAMES = ("paper", "budget", "none", "calibrated", "calibrated-platt", "two-sided", "two-sided-platt", "evidence")

# The PUAudit paper's rule was named "seed" (the paper was "seed 000" in this project) until 0.1.0; the name
# is accepted with a FutureWarning for one release.
RENAMED_RULES = {"seed": "paper"}


def current_rule(name: str) -> str:
    """``name``, or the current name of a renamed rule (with a FutureWarning saying so)."""
    if name in RENAMED_RULES:
        warnings.warn(f"the rule {name!r} is now named {RENAMED_RULES[name]!r}; {name!r} will be removed in the "
                      "next release", FutureWarning, stacklevel=3)  # fmt: skip
        return RENAMED_RULES[name]
    return name


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    """``kinds`` as a tuple, each one of :data:`EVIDENCE_KINDS` (ValueError naming the others)."""
    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in EVIDENCE_KINDS]
    if unknown:
        raise ValueError(f"unknown evidence {unknown}; use some of {', '.join(EVIDENCE_KINDS)}")
    return kinds
