"""Reproductions: the papers' protocols and tables on the bundled data and the local judge,
and the studies built on them, each writing its ``results/`` files. ``puaudit_protocol`` and
``puaudit_rules`` (PUAudit's evaluation and decision rules), ``attack_protocol`` (attacks on the
judge), ``local_judge_mtbench`` and ``local_judge_types`` (the local SmolLM2 judge on MT-Bench),
``served_judge`` (the judge behind llama.cpp's server), ``borp_usr`` (BoRP on USR Topical-Chat),
``uda_alignment`` (UDA and consensus alignment), ``learned_metric`` (a metric learned through the
partial OT loss), ``quantify_bundled`` and ``quantify_coverage`` (the quantification estimators).
"""
