"""The judges a guarantee certifies by, each with its candidates (:func:`stages_of`).

The judge audited is the first stage; with a cascade each other judge, cheapest first, is one more.
Each judge gets the candidates ``AuditConfig.certify`` names (:data:`~puaudit_jax.audit.names.CERTIFY`):

- its label-free score (:func:`~puaudit_jax.audit.evidence.label_free_score`): for the first judge its
  swapped-order verdict, its confidence and (without a cascade) the other judges; for a cascade's judge k
  the judges before it, as its audit weighs them (never those after it: they are asked only for the rows
  that reach them), the first judge's own tells left out;
- its audit's P(judge wrong) (the audit run on that judge's verdicts).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..evidence import LABEL_FREE, label_free_score
from ..names import CERTIFY
from .candidates import Candidate, fitted, label_free
from .certify import Stage
from .roles import RowRoles


def judge_candidates(spec: tuple, score: np.ndarray, p_wrong: np.ndarray, judge: np.ndarray,
                     roles: RowRoles) -> tuple[Candidate, ...]:  # fmt: skip
    """The candidates of one judge, as ``spec`` says.

    Args:
        spec: (name, share of delta, where its level goes) per candidate (a value of
            :data:`~puaudit_jax.audit.names.CERTIFY`).
        score: (n,) its label-free score.
        p_wrong: (n,) its audit's P(judge wrong) (NaN where none).
        judge: (n,) its verdicts.
        roles: the rows' roles.
    """
    out = []
    for name, share, weights in spec:
        if name == "label-free":
            candidate = label_free(score, judge, roles.labelled)
        else:
            candidate = fitted(p_wrong, judge, roles.hidden, roles.pool, semi_supervised=name == "fitted-ppi")
        out.append(replace(candidate, share=share, weights=weights))
    return tuple(out)


def stages_of(table: pd.DataFrame, items: pd.DataFrame, others: list, roles: RowRoles, config) -> list[Stage]:
    """One :class:`~.certify.Stage` per judge (module docstring).

    Args:
        table: the comparison table (n rows, the evidence columns, other judges in normal form).
        items: the first judge's audit items (``p_wrong``), same rows in the same order.
        others: the cascade's later judges, in order: (name, its audit's items, its audit's table, the columns of
            the judges before it in that table), or ().
        roles: the rows' roles.
        config: the audit's settings (``certify``, ``evidence``, ``other_judges``, ``cascade``).
    """
    spec, kinds = CERTIFY[config.certify], tuple(k for k in config.evidence if k in LABEL_FREE)
    first_others = () if config.cascade else config.other_judges
    judge, p = table["judge"].to_numpy(dtype=object), items["p_wrong"].to_numpy(float)
    score = label_free_score(table, first_others, kinds)
    stages = [Stage("judge", judge, judge_candidates(spec, score, p, judge, roles), p)]
    for name, judged_items, judged_table, earlier in others:
        score = label_free_score(judged_table, earlier, tuple(k for k in kinds if k == "others"))
        verdicts, p = judged_table["judge"].to_numpy(dtype=object), judged_items["p_wrong"].to_numpy(float)
        stages.append(Stage(name, verdicts, judge_candidates(spec, score, p, verdicts, roles), p))
    return stages
