"""The settings of :func:`~.pipeline.quantify` and :func:`~.plan.plan_labels`: light, for the ``puaudit`` parser.

Frozen dataclasses and their checks, importable without any numerical library; :mod:`.pipeline`
and :mod:`.plan` give them with the code that uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from puaudit_runtime.checks import check_fraction, check_int

from ..datasets.names import STYLE_FEATURES

TARGETS = ("agreement", "a-share")
BIAS = "judge bias: "  # the target "judge bias: share of A wins": the judge's number minus the humans'


def check_level(level: float) -> float:
    """``level`` as a float in (0, 1), or ValueError."""
    return check_fraction("level", level, what="the coverage of the intervals")


@dataclass(frozen=True)
class QuantifyConfig:
    """Settings of :func:`quantify` (the CLI's options are generated from them).

    Attributes:
        level: coverage of the confidence intervals, in (0, 1)
        cluster_by: column grouping rows that share texts (e.g. prompt): cluster-robust intervals
        style: style features controlled for in a second, style-controlled leaderboard (comma list;
            "" for none): normalised A - B differences of tokens, headers, list items, bold, ...
        raters: columns whose verdicts Krippendorff's alpha compares (comma list; a cell may hold several
            votes, "A,tie,B"); "" for the judge and the human votes (judge,votes where the table has a
            votes column, else judge,human)
        resamples: bootstrap resamples of the kappa and alpha intervals (clusters: --cluster-by, else the question)
        seed: random seed of the bootstrap
        robustness: also count how many comparisons must be dropped to change each leaderboard's #1 and
            adjacent pairs (first-order influence confirmed by refit; robustness.csv)
    """

    level: float = 0.9
    cluster_by: str | None = None
    style: tuple[str, ...] = field(default=("tokens", "headers", "list_items", "bold"),
                                   metadata={"choices": STYLE_FEATURES})  # fmt: skip
    raters: tuple[str, ...] = ()
    resamples: int = 1000
    seed: int = 0
    robustness: bool = False

    def __post_init__(self):
        check_level(self.level)
        _check_style(tuple(self.style))
        check_int("resamples", self.resamples, 10, "bootstrap resamples")
        check_int("seed", self.seed, 0, "a numpy Generator seed")


def _check_style(style: tuple[str, ...]) -> None:
    """Raise ValueError for a style feature that is unknown or named twice (a repeat would be fitted twice)."""
    unknown = [f for f in style if f not in STYLE_FEATURES]
    if unknown:
        raise ValueError(f"style: unknown features {unknown}; use names of {', '.join(STYLE_FEATURES)}")
    repeated = sorted({f for f in style if style.count(f) > 1})
    if repeated:
        raise ValueError(f"style: {repeated} named more than once")


@dataclass(frozen=True)
class PlanConfig:
    """Settings of :func:`plan_labels` (the CLI's options are generated from them).

    Attributes:
        budget: expected number of items to send to humans (Poisson sampling: the count drawn varies
            by about its square root)
        target: the mean the power analysis is for: agreement (judge == human) or a-share (A wins)
        width: interval half-width the power analysis solves for (labels needed), or none
        mix: share of uniform sampling mixed into the probabilities, in [0, 1] (1: random sampling)
        seed: random seed of the draw
        level: coverage of the intervals of the power analysis, in (0, 1)
    """

    budget: int = 100
    target: str = "agreement"
    width: float | None = None
    mix: float = 0.2
    seed: int = 0
    level: float = 0.9

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if self.budget < 1:
            raise ValueError(f"--budget {self.budget}: need at least 1 item")
        if self.target not in TARGETS:
            raise ValueError(f"--target {self.target!r}: use one of {', '.join(TARGETS)}")
        if self.width is not None and not self.width > 0:
            raise ValueError(f"--width {self.width}: a half-width must be > 0")
        if not 0 <= self.mix <= 1:
            raise ValueError(f"--mix {self.mix}: must be in [0, 1]")
        if not 0 < self.level < 1:
            raise ValueError(f"--level {self.level}: must be in (0, 1)")
        check_int("seed", self.seed, 0, "a numpy Generator seed")
