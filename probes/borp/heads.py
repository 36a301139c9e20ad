"""4. Regression heads on contrastive vectors (BoRP §3.3, §5.2, Appendix E).

Features [v, ||v||_2, D] (`geometry.geometric_features`) -> PLS head (`probes.pls`, scale=True) ->
prediction clipped to the rubric's scale (`BorpHead`), optionally on geometric resamples of the
training set (`geometry.density_resample`). `reducer="pca"` is the paper's ablation (principal
components of the same standardised features + least squares). Layer-wise uncertainty
(`LayerwiseHeads`, §3.3 / §5.2): heads on an intermediate and the final layer; ``U = |y_final - y_mid|``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from probes.pls import PLSRegression

from .geometry import density_resample, geometric_features, outlierness

__all__ = ["HeadConfig", "BorpHead", "LayerwiseHeads"]


@dataclass(frozen=True)
class HeadConfig:
    """A regression head on contrastive vectors.

    Attributes:
        n_components: PLS (or PCA) components.
        reducer: "pls" | "pca".
        geometric: append ||v|| and D.
        resample: None | "geometric" (density of D) | "label" (density of the training y).
        power: `density_resample`'s power.
        bins: `density_resample`'s bins.
        max_ratio: `density_resample`'s max_ratio.
        n_resamples: heads averaged over independent resamples (bagging; 1 = a single resample).
        scale: clip predictions to (low, high) or None.
        seed: numpy Generator seed of the resampling.
    """

    n_components: int = 8
    reducer: str = "pls"
    geometric: bool = True
    resample: str | None = "geometric"
    power: float = 1.0
    bins: int = 10
    max_ratio: float = 5.0
    n_resamples: int = 1
    scale: tuple[float, float] | None = (1.0, 5.0)
    seed: int = 0


class _PCR:
    """Principal-component regression on standardised features (the paper's "PCA instead of PLS")."""

    def __init__(self, n_components: int):
        self.n_components = n_components

    def fit(self, X, y):
        X = np.asarray(X, np.float64)
        self.mean_, self.std_ = X.mean(0), X.std(0, ddof=1)
        self.std_[self.std_ == 0] = 1.0
        Z = (X - self.mean_) / self.std_
        _, _, vt = np.linalg.svd(Z, full_matrices=False)
        self.components_ = vt[: self.n_components]
        T = Z @ self.components_.T
        self.y_mean_ = float(np.mean(y))
        self.coef_, *_ = np.linalg.lstsq(T, np.asarray(y, np.float64) - self.y_mean_, rcond=None)
        return self

    def predict(self, X):
        Z = (np.asarray(X, np.float64) - self.mean_) / self.std_
        return Z @ self.components_.T @ self.coef_ + self.y_mean_


class BorpHead:
    """Features -> (resampling) -> PLS / PCA regression -> clipped scores. V (n, d), y (n,).

    ``mesh`` (a jax.sharding.Mesh of this process's devices, or None): the PLS fits split their
    samples over its devices. It is used by ``fit`` only and not kept, so a fitted head pickles.
    """

    def __init__(self, config: HeadConfig = HeadConfig(), mesh=None):
        self.config = config
        self.mesh = mesh

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "mesh"}

    def __setstate__(self, state):
        self.__dict__.update(state, mesh=None)

    def _features(self, V):
        return geometric_features(V, self.centroid_) if self.config.geometric else np.asarray(V)

    def fit(self, V, y):
        """Fit the head(s) on V (n, d), y (n,) and return self; a bad reducer / resample is a ValueError."""
        cfg = self.config
        V, y = np.asarray(V), np.asarray(y, np.float64)
        if cfg.reducer not in ("pls", "pca"):
            raise ValueError(f"reducer must be 'pls' or 'pca', not {cfg.reducer!r}")
        if cfg.resample not in (None, "geometric", "label"):
            raise ValueError(f"resample must be None, 'geometric' or 'label', not {cfg.resample!r}")
        self.centroid_ = V.mean(axis=0)
        F = self._features(V)
        rng = np.random.default_rng(cfg.seed)
        driver = outlierness(V, self.centroid_) if cfg.resample == "geometric" else y
        k = min(cfg.n_components, len(y) - 1, F.shape[1])
        self.models_ = []
        for _ in range(cfg.n_resamples if cfg.resample else 1):
            idx = (
                density_resample(driver, rng, power=cfg.power, bins=cfg.bins, max_ratio=cfg.max_ratio)
                if cfg.resample
                else np.arange(len(y))
            )
            kk = min(k, len(np.unique(idx)) - 1)
            model = PLSRegression(kk, mesh=self.mesh) if cfg.reducer == "pls" else _PCR(kk)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(exhausted|y residual is constant).*")
                self.models_.append(model.fit(F[idx], y[idx]))
            if cfg.reducer == "pls":
                model.set_params(mesh=None)  # a fitted model keeps no mesh: it must pickle
        return self

    def predict(self, V) -> np.ndarray:
        """Scores (n,) of V (n, d): the mean over the fitted heads, clipped to the config's scale."""
        F = self._features(V)
        pred = np.mean([np.asarray(m.predict(F), np.float64).ravel() for m in self.models_], axis=0)
        return np.clip(pred, *self.config.scale) if self.config.scale is not None else pred


class LayerwiseHeads:
    """Two heads, intermediate and final layer (PUAudit §3.3): predict -> (y_final, y_mid, ``|diff|``).

    V (n, L, d) with layer axis 1; `mid` and `final` index into it.
    """

    def __init__(self, config: HeadConfig = HeadConfig(), mid: int = 0, final: int = -1):
        self.config, self.mid, self.final = config, mid, final

    def fit(self, V, y):
        """Fit both heads on V (n, L, d), y (n,) and return self."""
        V = np.asarray(V)
        self.head_final_ = BorpHead(self.config).fit(V[:, self.final], y)
        self.head_mid_ = BorpHead(self.config).fit(V[:, self.mid], y)
        return self

    def predict(self, V):
        """(y_final (n,), y_mid (n,), ``|y_final - y_mid|`` (n,)) of V (n, L, d)."""
        V = np.asarray(V)
        yf, ym = self.head_final_.predict(V[:, self.final]), self.head_mid_.predict(V[:, self.mid])
        return yf, ym, np.abs(yf - ym)
