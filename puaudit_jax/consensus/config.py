"""The settings of the consensus fits and runs: light (no JAX, pandas or scipy), for the ``puaudit`` parser.

:class:`BTConfig` (Bradley-Terry), :class:`EloConfig` (online Elo), :class:`AlignConfig` (consensus
alignment) and :class:`ScoresConfig` (``puaudit consensus scores``); :mod:`.bradley_terry`,
:mod:`.elo`, :mod:`.alignment` and :mod:`.runs` give them with the code that uses them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from puaudit_runtime.checks import check_int, check_real

ANCHORS = ("self", "consensus")
MODES = ("shrink", "residual")


@dataclass(frozen=True)
class BTConfig:
    """Options of :func:`fit_bt`.

    Attributes:
        ties: half (a tie is half a win each) or davidson (a tie parameter is estimated)
        ridge: Gaussian prior precision on theta (0 = plain maximum likelihood, needs a strongly
            connected comparison graph)
        anchor: model pinned at anchor_value (default: the mean score is anchor_value)
        anchor_value: Elo points of the anchor
        max_iter: Newton iterations
        tol: stopping tolerance on the largest absolute gradient (per comparison)
    """

    ties: str = field(default="half", metadata={"choices": ("half", "davidson")})
    ridge: float = 0.0
    anchor: str | None = None
    anchor_value: float = 1000.0
    max_iter: int = 100
    tol: float = 1e-10

    def __post_init__(self):
        if self.ties not in ("half", "davidson"):
            raise ValueError(f"ties must be 'half' or 'davidson', got {self.ties!r}")
        check_real("ridge", self.ridge, 0, what="Gaussian prior precision; 0 = plain maximum likelihood")
        check_real("anchor_value", self.anchor_value, what="Elo points of the anchor")
        check_int("max_iter", self.max_iter, 1, "Newton iterations")
        check_real("tol", self.tol, 0, strict=True, what="max |gradient| per comparison")


@dataclass(frozen=True)
class EloConfig:
    """Options of the online Elo ratings.

    Attributes:
        k: K factor (Elo points per unit surprise).
        n_orders: shuffled orders averaged (1 = file order when shuffle is False).
        shuffle: shuffle the comparisons' order.
        init: start rating (Elo points).
        anchor: as in BTConfig.
        anchor_value: as in BTConfig (Elo points).
        seed: numpy seed.
    """

    k: float = 4.0
    n_orders: int = 100
    shuffle: bool = True
    init: float = 1000.0
    anchor: str | None = None
    anchor_value: float = 1000.0
    seed: int = 0

    def __post_init__(self):
        check_real("k", self.k, 0, strict=True, what="the K factor, Elo points per unit surprise")
        check_int("n_orders", self.n_orders, 1, "shuffled orders averaged; --orders")
        check_real("init", self.init, what="start rating")
        check_real("anchor_value", self.anchor_value, what="Elo points of the anchor")
        check_int("seed", self.seed, 0, "numpy seed")


@dataclass(frozen=True)
class AlignConfig:
    """Weights of the three terms, the anchor, the adapter and its training.

    The default consensus weight 4 is the setting of the guide's "ours" row (Pearson to human 0.868
    on the transfer set); ``w_consensus=1`` with ``anchor="consensus"`` is the appendix's objective.

    Attributes:
        w_anchor: weight of the anchor term (MSE to the anchor)
        w_rank: weight of the rank term (1 - Pearson to the anchor)
        w_consensus: weight of the consensus term (MSE to the judges' mean)
        anchor: self (each judge's own baseline scores) or consensus (the baseline consensus);
            ``align`` also takes a per-model Series instead
        mode: shrink (a learned alpha between a judge's score and the consensus) or residual (a learned
            correction)
        embed_dim: size of the judge and model identity embeddings
        hidden: size of the adapter's hidden layer
        steps: adamw steps, full batch
        learning_rate: adamw learning rate
        weight_decay: adamw weight decay
        seed: seed of the parameter initialisation
    """

    w_anchor: float = 1.0
    w_rank: float = 1.0
    w_consensus: float = 4.0
    anchor: str = field(default="self", metadata={"choices": ANCHORS})
    mode: str = field(default="shrink", metadata={"choices": MODES})
    embed_dim: int = 4
    hidden: int = 16
    steps: int = 600
    learning_rate: float = 0.03
    weight_decay: float = 1e-4
    seed: int = 0

    def __post_init__(self):
        for name in ("w_anchor", "w_rank", "w_consensus"):
            check_real(name, getattr(self, name), 0, what="weight of its term")
        if self.anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {ANCHORS} (or pass a Series to align()), got {self.anchor!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("steps", "embed_dim", "hidden"):
            check_int(name, getattr(self, name), 1)
        check_real("learning_rate", self.learning_rate, 0, strict=True)
        check_real("weight_decay", self.weight_decay, 0)
        check_int("seed", self.seed, 0, "parameter initialisation")


@dataclass(frozen=True)
class ScoresConfig:
    """Settings of :func:`judge_scores` besides the fits' own (:class:`BTConfig`, :class:`EloConfig`).

    Attributes:
        method: bt (Bradley-Terry) or elo (online Elo)
        n_boot: bootstrap resamples for intervals (BT)
        seed: seed of the bootstrap resamples
        reference: judge whose scores the others are compared with (default: the consensus)
    """

    method: str = field(default="bt", metadata={"choices": ("bt", "elo")})
    n_boot: int = 0
    seed: int = 0
    reference: str | None = None

    def __post_init__(self):
        check_int("n_boot", self.n_boot, 0, "bootstrap resamples; 0 = no intervals")
        check_int("seed", self.seed, 0, "numpy seed")


#: The settings only one method reads (the fields of ScoresConfig, BTConfig and EloConfig).
ONLY_BT, ONLY_ELO = ("n_boot", "ties", "ridge", "max_iter", "tol"), ("k", "n_orders", "shuffle", "init")


def refuse_other_method(config: ScoresConfig, bt: BTConfig, elo: EloConfig) -> None:
    """Raise ValueError naming the settings changed from their defaults that ``config.method`` would ignore.

    Args:
        config: the scores settings (its ``method``: "bt" or "elo").
        bt: the Bradley-Terry settings (its tie model, ridge, bootstrap, Newton settings: ignored by "elo").
        elo: the Elo settings (K, orders, shuffle, start rating: ignored by "bt").

    Raises:
        ValueError: the changed settings the method ignores, named.
    """
    values = {**asdict(config), **asdict(bt), **{f: getattr(elo, f) for f in ONLY_ELO}}
    defaults = {**asdict(ScoresConfig()), **asdict(BTConfig()), **{f: getattr(EloConfig(), f) for f in ONLY_ELO}}
    other, what = (ONLY_BT, "Bradley-Terry") if config.method == "elo" else (ONLY_ELO, "Elo")
    changed = [f for f in other if values[f] != defaults[f]]
    if changed:
        raise ValueError(f"method {config.method!r} ignores {what}'s settings {', '.join(changed)}: leave them at "
                         f"their defaults, or use method {'bt' if config.method == 'elo' else 'elo'!r}")  # fmt: skip
