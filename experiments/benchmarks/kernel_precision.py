"""Can a bfloat16 / float16 kernel speed up the dense Sinkhorn iteration on this backend?

The scaling-mode iteration (``puaudit_jax/ot/sinkhorn.py``, ``_scaling_iteration``) streams the
kernel K (n, k) twice per iteration: K v and u^T K. Stored in 16 bits it would stream half the
bytes. This script times that pair of products, side by side in one process, with K stored in
float32 (the solver's choice) and in bfloat16 / float16, written three ways:

- ``dot``        jnp.dot(K16, v32, preferred_element_type=float32): what a mixed-precision solver
                 would write (the scalings stay float32: a 16-bit v perturbs the fixed point by
                 ~2^-9 relative, above the solver's tol = 1e-4)
- ``dot, v16``   the native 16-bit product (scalings rounded to 16 bits too)
- ``reduce``     sum(K16.astype(float32) * v32): a fused elementwise-and-reduce loop

Each variant runs ``--iters`` dependent product pairs in one compiled loop (min of 3 runs after a
compile run) and reports ms per pair, the ratio to float32, the largest relative error of K v
against a float64 product, and XLA's temporary buffers for the loop (a temporary of n x k float32
means XLA converted the 16-bit K into a float32 copy and streams that). Entries of K are
exp(-10 U), U uniform: six orders of magnitude, like a Sinkhorn kernel at moderate epsilon.

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python -m experiments.benchmarks.kernel_precision \
        [--sizes 5000x5000,2000x100000] [--iters 20]

Writes ``results/bench_kernel_precision.{json,md}``.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments.common import RESULTS, best_seconds
from puaudit_runtime.files import write_json, write_text

HIGHEST = jax.lax.Precision.HIGHEST


def _dot(K, u, v):
    f32 = jnp.float32
    return (
        jnp.dot(K, v, precision=HIGHEST, preferred_element_type=f32),
        jnp.dot(u, K, precision=HIGHEST, preferred_element_type=f32),
    )


def _dot_low(K, u, v):
    f32 = jnp.float32
    return (
        jnp.dot(K, v.astype(K.dtype), preferred_element_type=f32),
        jnp.dot(u.astype(K.dtype), K, preferred_element_type=f32),
    )


def _reduce(K, u, v):
    Kf = K.astype(jnp.float32)
    return jnp.sum(Kf * v[None, :], axis=1), jnp.sum(Kf * u[:, None], axis=0)


VARIANTS = {"dot": _dot, "dot, v16": _dot_low, "reduce": _reduce}


def _loop(pair, iters: int):
    """``iters`` dependent (K v, u^T K) pairs: each pair nudges u, v so no product is reused."""

    def run(K, u, v):
        def body(_, c):
            Kv, uK = pair(K, *c)
            return c[0] + 1e-9 * Kv, c[1] + 1e-9 * uK

        return jax.lax.fori_loop(0, iters, body, (u, v))

    return jax.jit(run)


def measure(K, u, v, pair, iters: int, reference: np.ndarray) -> dict:
    """ms per product pair, relative error of K v against ``reference`` (float64), XLA temp MB."""
    prog = _loop(pair, iters)
    compiled = prog.lower(K, u, v).compile()
    jax.block_until_ready(prog(K, u, v))
    best = best_seconds(lambda: jax.block_until_ready(prog(K, u, v)), 3)
    Kv = np.asarray(jax.jit(pair)(K, u, v)[0], np.float64)
    mem = compiled.memory_analysis()
    return {
        "ms_per_pair": 1e3 * best / iters,
        "rel_err_Kv": float(np.max(np.abs(Kv - reference) / reference)),
        "temp_mb": (mem.temp_size_in_bytes / 2**20) if mem is not None else float("nan"),
    }


def bench_size(n: int, k: int, iters: int) -> list[dict]:
    rng = np.random.default_rng(0)
    K64 = np.exp(-10.0 * rng.random((n, k)))
    u = jnp.asarray(rng.random(n), jnp.float32)
    v = jnp.asarray(rng.random(k), jnp.float32)
    reference = K64 @ np.asarray(v, np.float64)
    rows = []
    K = jnp.asarray(K64, jnp.float32)
    del K64
    base = measure(K, u, v, _dot, iters, reference)
    rows.append({"size": f"{n}x{k}", "storage": "float32", "variant": "dot", **base, "ratio": 1.0})
    print(f"{n}x{k} float32 dot: {base['ms_per_pair']:.2f} ms/pair", flush=True)
    for dtype in ("bfloat16", "float16"):
        K16 = K.astype(dtype)
        for name, pair in VARIANTS.items():
            r = measure(K16, u, v, pair, iters, reference)
            r["ratio"] = base["ms_per_pair"] / r["ms_per_pair"]
            rows.append({"size": f"{n}x{k}", "storage": dtype, "variant": name, **r})
            print(f"{n}x{k} {dtype} {name}: {r['ms_per_pair']:.2f} ms/pair ({r['ratio']:.2f}x)", flush=True)
        del K16
    return rows


def to_markdown(rows: list[dict], info: dict) -> str:
    lines = [
        "# Sinkhorn kernel precision: K v + u^T K with K stored in 16 bits",
        "",
        f"{info['backend']} ({info['device']}), jax {info['jax']}, {info['iters']} pairs per loop, min of 3 runs. "
        "ratio = float32 time / this time (> 1: faster). temp MB: XLA's temporaries for the loop "
        "(an n x k float32 copy of K = the 16-bit storage is converted once and never streamed).",
        "",
        "| size | K storage | product | ms per pair | ratio to float32 | max rel. error of K v | temp MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['storage']} | {r['variant']} | {r['ms_per_pair']:.2f} | {r['ratio']:.2f}x "
            f"| {r['rel_err_Kv']:.1e} | {r['temp_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="5000x5000,2000x100000", help="comma-separated n x k")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=str(RESULTS / "bench_kernel_precision"))
    args = ap.parse_args(argv)
    dev = jax.devices()[0]
    info = {
        "backend": jax.default_backend(),
        "device": getattr(dev, "device_kind", str(dev)),
        "jax": jax.__version__,
        "machine": platform.processor() or platform.machine(),
        "iters": args.iters,
    }
    rows = []
    for size in args.sizes.split(","):
        n, k = (int(x) for x in size.lower().split("x"))
        rows += bench_size(n, k, args.iters)
    write_json({"info": info, "rows": rows}, Path(args.out + ".json"))
    md = to_markdown(rows, info)
    write_text(md, Path(args.out + ".md"))
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
