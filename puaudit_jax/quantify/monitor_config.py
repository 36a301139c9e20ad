"""The settings of :func:`~.monitor.monitor`: light, for the ``puaudit`` parser (no numerical library)."""

from __future__ import annotations

from dataclasses import dataclass, field

from puaudit_runtime.checks import check_choice, check_fraction, check_int

from .config import TARGETS

DESIGNS = ("mixture", "single")
"""E-process designs: a mixture over start times of betting processes, or one process from the first label."""


@dataclass(frozen=True)
class MonitorConfig:
    """Settings of :func:`~puaudit_jax.quantify.monitor` (the CLI's options are generated from them).

    Attributes:
        order: the column whose values order the labels in time (a time or a batch number; rows with
            the same value arrive together, as one batch)
        target: the mean followed: agreement (judge == human) or a-share (A wins, a tie counts 1/2)
        threshold: the alarm tests that the mean stays >= this value, in (0, 1); none: no test, the
            confidence sequence only
        alpha: error level: the confidence sequence misses the mean at some n, or the alarm rings on a
            stream whose mean stays >= the threshold, with probability <= alpha; in (0, 1)
        design: the e-process: mixture (over start times, quick after a long good stretch) or single
            (one betting process from the first label)
        memory: labels the alarm's bets look back over (exponential discount; smaller reacts faster,
            larger bets more steadily)
        seed: random seed of the order of the rows within a batch (a seeded shuffle)
    """

    order: str | None = None
    target: str = field(default="agreement", metadata={"choices": TARGETS})
    threshold: float | None = None
    alpha: float = 0.05
    design: str = field(default="mixture", metadata={"choices": DESIGNS})
    memory: int = 50
    seed: int = 0

    def __post_init__(self):
        if self.order is None:
            raise ValueError("--order: name the column that orders the labels in time (a time or a batch)")
        check_choice("target", self.target, TARGETS)
        check_fraction("threshold", self.threshold, what="the agreement the alarm tests for", optional=True)
        check_fraction("alpha", self.alpha, what="the error level")
        check_choice("design", self.design, DESIGNS)
        check_int("memory", self.memory, 1, "labels the bets look back over")
        check_int("seed", self.seed, 0, "a numpy Generator seed")
