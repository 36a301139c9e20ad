"""The settings of a probe fit (``puaudit probe fit``), importable without scikit-learn.

:mod:`probes.borp` and :mod:`probes.fitted` need scikit-learn; the command line builds its options
from :class:`FitConfig` before any of them is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FitConfig:
    """What a probe is fitted with: the encoder and prompt of its features, and its head's settings.

    The head's fields default as :class:`probes.borp.HeadConfig`'s; :meth:`head_config` makes it.

    Attributes:
        encoder: smollm2 | minilm | a local HF folder
        rubric: text file: one 'score: description' line per score (default: the blind prompt)
        criterion: the criterion the rubric prompt asks about
        scale: low,high of the scores (predictions are clipped)
        layer: hidden layer whose states are read (negative: counted from the last)
        n_components: PLS components of the head
        resample: training set resampled by the density of D (geometric) or of the scores (label)
        seed: seed of the resampling
    """

    encoder: str = "smollm2"
    rubric: str | None = None
    criterion: str = "overall quality"
    scale: tuple[float, ...] = (1.0, 5.0)
    layer: int = -1
    n_components: int = 8
    resample: str | None = field(default="geometric", metadata={"choices": ("geometric", "label")})
    seed: int = 0

    def validate(self) -> None:
        """Raise ValueError naming ``scale`` unless it is two finite numbers, low below high."""
        import math

        text = ",".join(f"{v:g}" for v in self.scale)
        if len(self.scale) != 2 or not all(math.isfinite(v) for v in self.scale):
            raise ValueError(f"scale {text}: two finite numbers low,high are needed (the scores' range)")
        if not self.scale[0] < self.scale[1]:
            raise ValueError(f"scale {text}: low must be below high (low,high of the scores, e.g. 1,5)")

    def head_config(self):
        """The :class:`probes.borp.HeadConfig` of these settings (its other fields at their defaults)."""
        from .borp import HeadConfig

        return HeadConfig(n_components=self.n_components, scale=tuple(self.scale), seed=self.seed,
                          resample=self.resample)  # fmt: skip
