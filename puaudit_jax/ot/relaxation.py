"""Over-relaxed Sinkhorn: the scaling step raised to a power omega in [1, 2), and its controller.

A Sinkhorn half-step replaces the row scaling u by a / (K v); the over-relaxed step (Thibault,
Chizat, Dossal & Papadakis, Algorithms 2021; Lehmann, von Renesse, Sambale & Uschmajew, Optim.
Lett. 2022) moves past it:

    u <- u^(1 - omega) (a / K v)^omega,      i.e.   f <- f + omega eps (log a - log(row sums)),

with the same fixed point for any omega in (0, 2). Near the solution plain Sinkhorn (omega = 1)
shrinks the error by a rate eta per iteration; with omega* = 2 / (1 + sqrt(1 - eta)) the rate
becomes omega* - 1 (Young's SOR theory, which the linearised Sinkhorn map satisfies): eta = 0.994
(1,500 plain iterations to tol 1e-4, as for a partial problem whose mass is near the class prior)
gives omega* = 1.86 and a rate of 0.86, ~60 iterations.

``"auto"`` starts plain and, every ``WINDOW`` iterations, measures the rate rho of the error
over the window, infers the plain rate eta it implies at the current omega (Young's relation
(rho + omega - 1)^2 = omega^2 eta rho) and raises omega to min(omega*(eta), OMEGA_MAX); it does
not lower omega from a rate, because an over-relaxed error oscillates (a window can end on a
peak) and while plain Sinkhorn sits on a plateau the over-relaxed one crosses it. Far from the
solution the iteration is not linear and a large omega can blow the error up: an error
``BLOWUP`` times the best one seen halves omega towards 1 (the safeguard; a fixed omega > 1 gets
it too and is otherwise left alone), and so does a non-finite update (``sinkhorn.py``). Whatever
omega does, the solver stops on the same marginal error as plain Sinkhorn.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

WINDOW = 10  # iterations between two error checkpoints
OMEGA_MAX = 1.8  # omega* tends to 2 as eta -> 1; far from the solution 1.9 blew the error up
BLOWUP = 10.0  # an error this many times the best one seen halves omega


class Relaxation(NamedTuple):
    """The controller's state (scalars).

    Attributes:
        omega: the relaxation factor in [1, 2).
        mark: the error at the last checkpoint (inf before the first).
        best: the best error at a checkpoint since omega last fell.
        adaptive: whether omega is adaptive ("auto") or fixed.
    """

    omega: jax.Array
    mark: jax.Array
    best: jax.Array
    adaptive: jax.Array


def check_setting(relaxation) -> None:
    """ValueError unless ``relaxation`` is "auto" or a number in [1, 2)."""
    if relaxation == "auto":
        return
    if isinstance(relaxation, bool) or not isinstance(relaxation, (int, float)) or not 1.0 <= relaxation < 2.0:
        raise ValueError(f"relaxation must be 'auto' or a number in [1, 2) (1 = plain Sinkhorn); got {relaxation!r}")


def start(relaxation, dtype) -> Relaxation:
    """The state before the first iteration: omega = 1 for "auto" (until a rate is measured), else the fixed omega."""
    auto = relaxation == "auto"
    omega = 1.0 if auto else float(relaxation)
    inf = jnp.asarray(jnp.inf, dtype)
    return Relaxation(jnp.asarray(omega, dtype), inf, inf, jnp.asarray(auto))


def optimal_omega(eta: jax.Array) -> jax.Array:
    """omega* = 2 / (1 + sqrt(1 - eta)) for a plain-Sinkhorn rate eta in [0, 1], capped at OMEGA_MAX."""
    return jnp.minimum(2.0 / (1.0 + jnp.sqrt(1.0 - jnp.clip(eta, 0.0, 1.0))), OMEGA_MAX)


def plain_rate(rho: jax.Array, omega: jax.Array) -> jax.Array:
    """The plain-Sinkhorn rate eta that a measured rate rho in (0, 1) at ``omega`` implies.

    From Young's relation (rho + omega - 1)^2 = omega^2 eta rho; eta = rho at omega = 1.
    """
    return jnp.clip((rho + omega - 1.0) ** 2 / (omega**2 * rho), 0.0, 1.0)


def update(state: Relaxation, it: jax.Array, err: jax.Array) -> Relaxation:
    """The controller after iteration ``it`` with marginal error ``err``.

    It acts only at checkpoints (it a multiple of WINDOW). Adaptive: when the error shrank over the window
    (rate rho = (err / mark)^(1 / WINDOW) < 1), omega rises to omega*(eta) for the plain rate eta
    that rho implies (:func:`plain_rate`). Safeguard: an error BLOWUP times the best one halves
    omega towards 1 (and becomes the new best).

    Args:
        state: the controller before the iteration.
        it: the iteration's index (scalar int).
        err: its marginal error (scalar; a non-finite one changes nothing).

    Returns:
        The new :class:`Relaxation` (the old one between checkpoints).
    """
    at_mark = (it % WINDOW == 0) & jnp.isfinite(err)
    measured = jnp.isfinite(state.mark) & (state.mark > 0) & (err > 0)
    rho = (err / jnp.where(measured, state.mark, 1.0)) ** (1.0 / WINDOW)
    rise = state.adaptive & measured & (rho < 1.0)
    omega = jnp.where(rise, jnp.maximum(state.omega, optimal_omega(plain_rate(rho, state.omega))), state.omega)
    blew_up = err > BLOWUP * state.best
    new = Relaxation(
        jnp.where(blew_up, halved(omega), omega).astype(state.omega.dtype),
        err.astype(state.mark.dtype),
        jnp.where(blew_up, err, jnp.minimum(err, state.best)).astype(state.best.dtype),
        state.adaptive,
    )
    return jax.tree.map(lambda n, o: jnp.where(at_mark, n, o), new, state)


def halved(omega: jax.Array) -> jax.Array:
    """Omega halved towards 1: the safeguard's step (a blow-up here, a non-finite update in ``sinkhorn.py``)."""
    return 1.0 + 0.5 * (omega - 1.0)


def scaled(old: jax.Array, plain: jax.Array, omega: jax.Array) -> jax.Array:
    """The relaxed scaling old^(1 - omega) plain^omega = old (plain / old)^omega; exactly ``plain`` while omega = 1.

    For positive scalings; callers mask the entries pinned to 0 or 1.

    Args:
        old: the scaling before the update (positive).
        plain: the plain Sinkhorn update of it (positive, same shape).
        omega: the relaxation factor, in [1, 2) (scalar).

    Returns:
        The relaxed scaling, ``plain``'s shape.
    """
    return jnp.where(omega == 1.0, plain, old * (plain / old) ** omega)
