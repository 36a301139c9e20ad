"""``puaudit_runtime.jit``: XLA:CPU's fast-compile options on top-level calls only, where ``when`` says."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from puaudit_runtime.jit import jit


def _softmax_mass(x, scale):
    return jnp.sum(jnp.exp(scale * x))  # a vector reduced to a scalar


def _tree_reduced(compiled) -> bool:
    """Whether XLA split the full reduction into a window of 32 and a reduction of the partial sums."""
    return "reduce-window" in compiled.as_text()


def test_a_top_level_cpu_call_compiles_with_the_options_and_gives_jax_jits_value():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    fast = jit(_softmax_mass)
    assert not _tree_reduced(fast.lower(x, 2.0).compile())
    assert _tree_reduced(jax.jit(_softmax_mass).lower(x, 2.0).compile())
    np.testing.assert_allclose(fast(x, 2.0), jax.jit(_softmax_mass)(x, 2.0), rtol=1e-6)


def test_when_false_compiles_as_jax_jit_does():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    seen = []
    plain = jit(_softmax_mass, when=lambda x, scale: seen.append((x.shape, scale)) or False)
    assert _tree_reduced(plain.lower(x, 2.0).compile())
    assert seen == [((1000,), 2.0)]  # the predicate sees the call's arguments


def test_nested_vmapped_and_differentiated_calls_run_without_the_options():
    """XLA refuses compile options on a nested jit: inside a trace the call is jax.jit's."""
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    fast = jit(_softmax_mass)
    np.testing.assert_allclose(jax.jit(lambda x: 2 * fast(x, 1.5))(x), 2 * _softmax_mass(x, 1.5), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(fast, in_axes=(0, None))(np.stack([x, -x]), 1.5)[1], _softmax_mass(-x, 1.5))
    np.testing.assert_allclose(jax.grad(fast)(x, 1.5), 1.5 * np.exp(1.5 * x), rtol=1e-5)


def test_static_arguments_pass_through_and_compiler_options_are_refused():
    @functools.partial(jit, static_argnames=("power",))
    def moment(x, *, power):
        return jnp.sum(x**power)

    assert float(moment(np.arange(4.0, dtype=np.float32), power=2)) == 14.0
    assert float(moment(np.arange(4.0, dtype=np.float32), power=3)) == 36.0
    with pytest.raises(ValueError, match="compiler_options"):
        jit(_softmax_mass, compiler_options={"xla_cpu_enable_fast_math": True})
