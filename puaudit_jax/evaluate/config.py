"""The protocol's settings and the pairs it compares: light (no numerical library), for the ``puaudit`` parser.

:mod:`.protocol` and :mod:`.demo` give them with the code that uses them.
"""

from __future__ import annotations

from dataclasses import dataclass

from puaudit_runtime.checks import check_fraction

from ..audit.config import DEFAULT_RULE, DEFAULT_SCORER, PAPER_RULE, PAPER_SCORER

DEFAULT_PAIRS = ((DEFAULT_SCORER, DEFAULT_RULE), (PAPER_SCORER, PAPER_RULE))
GRID_SCORERS, GRID_RULES = (DEFAULT_SCORER,), (DEFAULT_RULE, PAPER_RULE)
DEMO_SCORERS = ("knn", "pot-exact")
# The agreement the demo guarantees (``puaudit demo --guarantee`` overrides it). MT-Bench's GPT-4 verdicts agree
# with the experts 87 % of the time; at the demo's 20 % labels A = 0.8 certifies 69 % of the pool on average
# over 200 maskings (results/guarantee.md), A = 0.85 19 %.
DEMO_GUARANTEE = 0.8


@dataclass(frozen=True)
class Protocol:
    """The protocol's settings (the audit's are an :class:`~puaudit_jax.audit.AuditConfig`).

    Attributes:
        seeds: number of random splits (seeds 0..n-1; the Python API also takes a list of seeds)
        p_ratio: share of each question type's labelled rows that stay labelled (the rest are hidden)
        split_by: hide labels by groups of this column (e.g. prompt: LLMFAO reuses a prompt's
            responses across pairs); pair with --cluster-by
        ceiling: add the 'hindsight' row: the best per-type flip budget chosen with the hidden labels
            (not a rule: the most any budget could gain)
    """

    seeds: int = 10
    p_ratio: float = 0.2
    split_by: str | None = None
    ceiling: bool = False

    @property
    def seed_list(self) -> list[int]:
        """The seeds: range(seeds) for an int, else the given seeds."""
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    def validate(self) -> None:
        """ValueError naming the first setting out of range (before any split or audit runs)."""
        if isinstance(self.seeds, bool) or (isinstance(self.seeds, int) and self.seeds < 1):
            raise ValueError(f"seeds must be >= 1 (the number of random splits), got {self.seeds!r}")
        if not isinstance(self.seeds, int) and (not self.seed_list or len(set(self.seed_list)) < len(self.seed_list)):
            raise ValueError(f"seeds must be a count or a non-empty list of distinct seeds, got {self.seeds!r}")
        check_fraction("p_ratio", self.p_ratio, what="the share of labels kept visible")
