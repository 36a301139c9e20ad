"""Decision rules: which judge verdicts of the unlabelled pool to flip, given normalised scores.

One interface, pluggable like the scorers::

    rule(normalised_scores (k,), context: RuleContext) -> flips (k,) bool

``normalised_scores`` are s̄_j = s_j / max_k s_k in [0, 1] of one scoring group (seed §3.3);
``RuleContext`` carries the audit's m, eta, the group name and the seed (calibrated rules of
issue 9 will add the labelled items' scores and judge-vs-human agreement to it).

=========  ================================================================================
``seed``   the seed's rule (§3.3, Algorithm 1 lines 13-18): flip where s̄_j < eta
``budget`` flip the floor((1 - m) * k) lowest-scoring items (ties broken by position): the
           number of flips an exact POT solution implies, whatever the scorer; used to compare
           scorers at the same flip budget
``none``   flip nothing (the raw judge; a reference row)
=========  ================================================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class RuleContext:
    """What a rule may look at besides the scores: m and eta of the audit, the group, the seed."""

    m: float
    eta: float
    group: str = "all"
    seed: int = 0


Rule = Callable[[np.ndarray, RuleContext], np.ndarray]


def seed_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    """Flip exactly where the normalised score is strictly below eta."""
    return np.asarray(scores) < ctx.eta


def budget_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    """Flip the floor((1 - m) k) lowest scores (stable order: earlier items first among ties)."""
    scores = np.asarray(scores)
    n_flip = int(np.floor((1.0 - ctx.m) * len(scores) + 1e-9))
    flips = np.zeros(len(scores), bool)
    flips[np.argsort(scores, kind="stable")[:n_flip]] = True
    return flips


def no_flip_rule(scores: np.ndarray, ctx: RuleContext) -> np.ndarray:
    return np.zeros(len(scores), bool)


RULES: dict[str, Rule] = {"seed": seed_rule, "budget": budget_rule, "none": no_flip_rule}


def get_rule(rule: str | Rule) -> Rule:
    if callable(rule):
        return rule
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; use one of {sorted(RULES)} or a callable")
    return RULES[rule]


def rule_name(rule) -> str:
    return rule if isinstance(rule, str) else getattr(rule, "__name__", "custom")
