"""Anytime-valid inference on a stream of bounded values by betting: a confidence sequence and an alarm.

- :func:`hedged_cs` -- the confidence sequence of Waudby-Smith & Ramdas (2023), "Estimating means of
  bounded random variables by betting" (JRSS-B), Theorem 3 with the predictable plug-in bets of their
  eq. (26): the set of means m whose hedged capital stays below 1/alpha, on a grid.
- :func:`drop_bets` -- predictable bets against "the mean stays >= A" (aGRAPA, their Section 5.2,
  on exponentially discounted estimates, so the bets follow a judge that changes).
- :func:`e_process` -- the wealth of those bets, from the first value (``single``) or mixed over
  start times (``mixture``, weights 1 / (s (s + 1)), which sum to 1): under H0 (every conditional
  mean >= A) both are test supermartingales, so by Ville's inequality P(ever >= 1/alpha) <= alpha.
  The mixture is the e-detector idea of Shin, Ramdas & Rinaldo (2024) with weights summing to 1.

Every function is a pure function of arrays; a leading batch axis runs many streams at once.
Validity assumes the values arrive in the stream's order and every bet uses earlier values only.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

GRID = 1000
"""Grid steps of [0, 1] on which the confidence sequence is computed (bounds widened by one step)."""
CHUNK = 128
"""Grid points computed at once (memory: a few (T, CHUNK) arrays)."""
TRUNCATION = 0.5
"""c of Waudby-Smith & Ramdas: every bet is at most c / (the largest loss per unit), so wealth keeps >= 1 - c."""


def plugin_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bet sizes of Waudby-Smith & Ramdas (2023), eq. (26), before truncation.

    lambda_t = sqrt(2 log(2 / alpha) / (sigma2_{t-1} t log(1 + t))), sigma2_t = (1/4 + sum_{i<=t}
    (x_i - mu_i)^2) / (t + 1), mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1): a bet uses earlier values only.

    Args:
        x: (..., T) values in [0, 1], in stream order.
        alpha: error level in (0, 1).

    Returns:
        (..., T) bet sizes >= 0.
    """
    t = np.arange(1, x.shape[-1] + 1)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), sigma2[..., :-1]], axis=-1)
    return np.sqrt(2 * np.log(2 / alpha) / (before * t * np.log1p(t)))


def hedged_cs(x: np.ndarray, alpha: float, grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """Confidence sequence for the mean of a stream in [0, 1] (Waudby-Smith & Ramdas 2023, Theorem 3).

    The hedged capital K_t(m) = max(K+_t(m), K-_t(m)) / 2, K+-_t(m) = prod_i (1 +- lambda+-_i(m) (x_i - m)),
    lambda+_i(m) = min(lambda_i, c / m), lambda-_i(m) = min(lambda_i, c / (1 - m)) (:func:`plugin_bets`,
    c = :data:`TRUNCATION`); the set {m : K_t(m) < 1 / alpha} holds the mean at every t at once with
    probability >= 1 - alpha when each value's conditional mean is that one mean.

    Args:
        x: (T,) values in [0, 1], in stream order.
        alpha: error level in (0, 1).
        grid: steps of the grid of m; each bound is widened by one step (conservative).

    Returns:
        (lower, upper), each (T,) in [0, 1]; NaN at a t where no grid point is left (the set is empty).
    """
    x = np.asarray(x, float)
    m = np.arange(grid + 1) / grid
    lam = plugin_bets(x, alpha)[:, None]
    inside = np.concatenate([_below(x, lam, m[k : k + CHUNK], alpha) for k in range(0, grid + 1, CHUNK)], axis=1)
    found = inside.any(axis=1)
    first, last = inside.argmax(axis=1), grid - inside[:, ::-1].argmax(axis=1)
    lower = np.where(found, np.maximum(first - 1, 0) / grid, np.nan)
    upper = np.where(found, np.minimum(last + 1, grid) / grid, np.nan)
    return lower, upper


def _below(x: np.ndarray, lam: np.ndarray, m: np.ndarray, alpha: float) -> np.ndarray:
    """(T, len(m)) whether the hedged capital at each mean of ``m`` is below 1 / alpha after each value."""
    diff = x[:, None] - m[None, :]
    with np.errstate(divide="ignore"):
        up = np.cumsum(np.log1p(np.minimum(lam, TRUNCATION / m) * diff), axis=0)
        down = np.cumsum(np.log1p(-np.minimum(lam, TRUNCATION / (1 - m)) * diff), axis=0)
    return np.maximum(up, down) - np.log(2) < np.log(1 / alpha)


def _discounted(x: np.ndarray, memory: int, start: float) -> np.ndarray:
    """(..., T) exponentially discounted sums s_t = x_t + beta s_{t-1}, beta = 1 - 1 / memory, s_0 = ``start``."""
    beta = 1 - 1 / memory
    sums = lfilter([1.0], [1.0, -beta], x, axis=-1)
    return sums + start * beta ** np.arange(1, x.shape[-1] + 1)


def drop_bets(x: np.ndarray, threshold: float, memory: int) -> np.ndarray:
    """Predictable bets lambda_t >= 0 on A - x_t: aGRAPA (Waudby-Smith & Ramdas 2023, Section 5.2).

    lambda_t = clip((A - mu_{t-1}) / (v_{t-1} + (A - mu_{t-1})^2), 0, c / (1 - A)), with mu and v the
    mean and variance of the earlier values discounted by 1 - 1 / ``memory`` (one prior value at A
    with variance 1/4): the bet grows once recent values fall below A, and is 0 while they do not.

    Args:
        x: (..., T) values in [0, 1], in stream order.
        threshold: A, in (0, 1).
        memory: labels the discount looks back over (>= 1).

    Returns:
        (..., T) bets; bet t uses x_1 .. x_{t-1} only.
    """
    weight = _discounted(np.ones_like(x), memory, 1.0)
    mean = _discounted(x, memory, threshold) / weight
    var = np.maximum(_discounted(x**2, memory, threshold**2 + 0.25) / weight - mean**2, 1e-4)
    gap = threshold - mean
    lam = np.clip(gap / (var + gap**2), 0.0, TRUNCATION / (1 - threshold))
    return np.concatenate([np.zeros(x.shape[:-1] + (1,)), lam[..., :-1]], axis=-1)


def e_process(x: np.ndarray, threshold: float, bets: np.ndarray, design: str = "mixture") -> np.ndarray:
    """Log e-values against H0: every value's conditional mean is >= ``threshold`` (A).

    ``single``: log prod_{i<=t} (1 + lambda_i (A - x_i)). ``mixture``: log of sum_{s<=t} w_s
    prod_{s<=i<=t} (1 + lambda_i (A - x_i)) + sum_{s>t} w_s, w_s = 1 / (s (s + 1)) (sum 1): a bettor
    starting at every label s at once, so evidence after a change is not spent on the good history.

    Args:
        x: (..., T) values in [0, 1], in stream order.
        threshold: A, in (0, 1).
        bets: (..., T) predictable bets in [0, c / (1 - A)] (:func:`drop_bets`).
        design: "mixture" or "single".

    Returns:
        (..., T) log e-values (the alarm: >= log(1 / alpha)).
    """
    wealth = np.cumsum(np.log1p(bets * (threshold - x)), axis=-1)
    if design == "single":
        return wealth
    if design != "mixture":
        raise ValueError(f"design must be 'mixture' or 'single', got {design!r}")
    s = np.arange(1, x.shape[-1] + 1)
    before = np.concatenate([np.zeros(x.shape[:-1] + (1,)), wealth[..., :-1]], axis=-1)  # log wealth at s - 1
    started = np.logaddexp.accumulate(-np.log(s * (s + 1.0)) - before, axis=-1) + wealth
    return np.logaddexp(started, -np.log(s + 1.0))  # sum_{s > t} w_s = 1 / (t + 1)


def alarm_possible_from(threshold: float, alpha: float) -> int:
    """The fewest values after which a single betting process can reach 1 / alpha (every value 0, largest bet).

    Each value multiplies the wealth by at most 1 + c A / (1 - A); the mixture needs at least this many too.
    """
    return int(np.ceil(np.log(1 / alpha) / np.log1p(TRUNCATION * threshold / (1 - threshold))))
