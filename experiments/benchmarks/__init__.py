"""Benchmarks: side-by-side comparisons that print ratios and write ``results/bench_*`` (or the
file ``--out`` names); nothing is asserted. ``ot`` (the partial OT solvers against POT and
ott-jax, and the mass path), ``extract`` (the Flax ports against PyTorch, shared-prefix probing,
data parallelism), ``pls`` (PLS against scikit-learn), ``scale`` (the sharded solver over 1-8
devices and a two-process cluster: memory, time per iteration, collective bytes from the HLO),
``kernel_precision`` (16-bit Sinkhorn kernels) and ``audit_scale`` (one large audit on 1, 2 and 8
devices, same answer). Those that need a fresh interpreter per configuration re-run their own
module as a worker (``--worker``) through :mod:`puaudit_runtime.launch`.
"""
