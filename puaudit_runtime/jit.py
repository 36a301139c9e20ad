"""``jax.jit`` whose programs compile in about half the time on XLA:CPU: the project's one jit.

XLA:CPU spends a first call's compile time per fused kernel (5-8 ms each on the 2-core development
machine, whatever the kernel does), so a program of small vector steps, such as a Sinkhorn solver
with its scalar bookkeeping, costs far more to compile than to run. Two of XLA's own options cut
that cost without changing what the program computes beyond float rounding
(``experiments/benchmarks/compile_options.py``, ``results/bench_compile_options.md``: the solver's
1000 x 1000 program from 138 kernels and 0.72 s to 70 kernels and 0.45 s). The price is run time:
the elemental emitter's kernels run 7-18 % slower on two cores, so a caller whose program runs
long or often says ``when`` (the solver: up to 2^22 cost cells):

- ``xla_cpu_use_fusion_emitters=False``: each kernel goes through XLA's LLVM elemental emitter
  instead of the MLIR fusion emitters, whose per-kernel pass pipelines are most of the cost;
- ``xla_disable_hlo_passes=tree_reduction_rewriter``: a vector reduced to a scalar stays one
  kernel. The pass splits it into a window-of-32 reduction and a reduction of the partial results
  (two kernels, not fused with the one that computes the vector) for pairwise summation. Without
  it a sum over n terms in float32 is sequential: rounding error of order sqrt(n) * 6e-8 relative
  for random rounding (2e-5 at n = 100,000) instead of log n. The project's full sums are marginal
  errors, masses and means compared with tolerances of 1e-4 or more; the transport cost and the
  plan's row and column sums are matrix reductions, which XLA:CPU gives to its YNN library kernels
  with or without the pass (the solver's compiled HLO has the same ones either way).

The options apply where they can: at a top-level call (XLA refuses compile options on a jit nested
in another traced function; there the outer program decides) on the CPU backend (other backends have
their own compilers and passes). Elsewhere this is ``jax.jit`` itself. The persistent compilation
cache keys programs by their options too, so a cached program is never one compiled with others.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
from jax._src import core as _core  # trace_state_clean: the one check that a call is not traced

__all__ = ["CPU_COMPILER_OPTIONS", "jit"]

CPU_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_disable_hlo_passes": "tree_reduction_rewriter",
}


class _Jit:
    """A function jitted twice, with and without :data:`CPU_COMPILER_OPTIONS`; a call takes the one that applies."""

    def __init__(self, fun, when, jit_kwargs: dict):
        self._plain = jax.jit(fun, **jit_kwargs)
        self._fast = jax.jit(fun, compiler_options=CPU_COMPILER_OPTIONS, **jit_kwargs)
        self._when = when
        functools.update_wrapper(self, fun)

    def _pick(self, args, kwargs):
        if not _core.trace_state_clean() or jax.default_backend() != "cpu":
            return self._plain
        return self._fast if self._when is None or self._when(*args, **kwargs) else self._plain

    def __call__(self, *args, **kwargs):
        return self._pick(args, kwargs)(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """``jax.jit(...).lower`` of the variant a call with these arguments would run."""
        return self._pick(args, kwargs).lower(*args, **kwargs)

    def __getattr__(self, name):  # eval_shape, trace, clear_cache, ...: as jax.jit's, of the plain variant
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._plain, name)


def jit(fun=None, /, *, when=None, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)``, compiled with :data:`CPU_COMPILER_OPTIONS` on the CPU backend.

    Used as ``jax.jit`` is: ``@jit``, ``@functools.partial(jit, static_argnames=...)`` or ``jit(f)``.

    Args:
        fun: the function; None returns a decorator taking it.
        when: None (the options for every top-level CPU call), or a predicate called with a call's
            arguments, True where that call's program should compile fast: where compiling it
            costs more than running it, e.g. a problem below a size (the options add 7-18 % to
            the solver's run time on two cores, ``results/bench_compile_options.md``).
        **jit_kwargs: ``jax.jit``'s keyword arguments (``static_argnames``, ``donate_argnums``, ...),
            except ``compiler_options``.

    Returns:
        A callable with ``jax.jit``'s behaviour and its ``lower`` (of the variant the call would run).
    """
    if "compiler_options" in jit_kwargs:
        raise ValueError("puaudit_runtime.jit sets compiler_options itself; use jax.jit for others")
    if fun is None:
        return functools.partial(jit, when=when, **jit_kwargs)
    return _Jit(fun, when, jit_kwargs)
