"""Experiments: scripts that measure the libraries and reproduce the papers' numbers, run from the
repository root as ``python -m experiments.<kind>.<name> [--help]``; they import the libraries
(``puaudit_runtime``, ``probes``, ``puaudit_jax``), nothing imports them.

    benchmarks/     side-by-side timings and memory of the solver, extraction, PLS and sharding
                    (ot, extract, pls, scale, kernel_precision, audit_scale)
    reproductions/  the papers' protocols and tables, and the studies built on them
                    (attack_protocol, borp_usr, learned_metric, local_judge_mtbench,
                    local_judge_types, puaudit_protocol, puaudit_rules, quantify_bundled,
                    quantify_coverage, served_judge, uda_alignment)
    common          what several of them share: result paths, worker processes (through
                    ``puaudit_runtime.launch``), timing, table cells, the machine header
"""
