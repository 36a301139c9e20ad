"""Is the labelled sample random? The balance checks on every value the guarantee's scores read.

The guarantee assumes the labelled rows are a random sample of the pool (within question types). The
chi-square checks of the labelled share by type and by the judge's verdict (:mod:`puaudit_jax.quantify.
sample_check`) see labels drawn by type or by verdict; labels drawn by what a score reads (only where a
second judge agrees, only where both orders agree) pass them. Two more checks compare the labelled rows
with the pool on those values, by :func:`~puaudit_jax.quantify.sample_check.balance_check` (Hotelling's
T^2, permutations within question types):

- ``evidence``: every judge-side value of the rows whose judge picked a side: each other judge's signed
  agreement, the swapped-order agreement, the confidence's certainty, whether each is present, and the
  style differences signed by the verdict;
- ``audit score``: the audit's P(judge wrong) of the rows whose labels were hidden against the pool's
  (the rows it fitted on have none that is comparable).

When any check fails, the guarantee does not apply and no row is trusted or flipped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...datasets.comparisons import other_judge_verdicts
from ...datasets.exclusions import LABELLED, UNLABELLED
from ...datasets.verdicts import MISSING, A, B
from ...quantify.sample_check import BalanceCheck, balance_check
from ..evidence import judge_evidence, preference_certainty, signed_agreement
from .roles import RowRoles


def evidence_values(table: pd.DataFrame, kinds: tuple[str, ...], other_judges: tuple[str, ...]):
    """((n, p) values, (p,) names) of the evidence the scores read (module docstring), 0 where absent.

    Args:
        table: the comparison table (n rows).
        kinds: the evidence kinds enabled (``AuditConfig.evidence``).
        other_judges: the other judges' columns.
    """
    judge = table["judge"].to_numpy(dtype=object)
    cols, names = [], []
    if "style" in kinds:
        style = judge_evidence(table, ("style",))
        cols += list(style.features.T)
        names += list(style.names)
    if "swapped" in kinds and "judge_swapped" in table.columns:
        swapped = table["judge_swapped"].to_numpy(dtype=object)
        cols += [signed_agreement(judge, swapped), (swapped != MISSING).astype(float)]
        names += ["swapped:agrees", "swapped:present"]
    if "confidence" in kinds and "judge_confidence" in table.columns:
        certainty = preference_certainty(pd.to_numeric(table["judge_confidence"], errors="coerce").to_numpy(float))
        cols += [np.where(np.isfinite(certainty), certainty, 0.0), np.isfinite(certainty).astype(float)]
        names += ["confidence:certainty", "confidence:present"]
    if "others" in kinds and other_judges:
        verdicts = other_judge_verdicts(table, other_judges, source="--other-judges")
        cols += [signed_agreement(judge, verdicts[:, k]) for k in range(len(other_judges))]
        names += [f"others:{name}" for name in other_judges]
    return (np.column_stack(cols) if cols else np.zeros((len(table), 0))), names


def balance_checks(table: pd.DataFrame, status: np.ndarray, types: np.ndarray, p_wrong: np.ndarray,
                   roles: RowRoles, config) -> tuple[BalanceCheck, ...]:  # fmt: skip
    """The ``evidence`` and ``audit score`` checks of the module docstring (those that can be made).

    Args:
        table: the comparison table (n rows, other judges in normal form).
        status: (n,) the rows' status with the labels as given (labelled / unlabelled / excluded).
        types: (n,) question types.
        p_wrong: (n,) the audit's P(judge wrong).
        roles: the rows' roles (hidden and pool rows).
        config: the audit's settings (``evidence``, ``other_judges``, ``seed``).
    """
    decided = np.isin(table["judge"].to_numpy(dtype=object), (A, B))
    labelled, pool = decided & (status == LABELLED), decided & (status == UNLABELLED)
    values, names = evidence_values(table, config.evidence, config.other_judges)
    checks = []
    if values.shape[1]:
        checks.append(balance_check(values, names, labelled, pool, types, by="evidence", seed=config.seed))
    hidden, in_pool = np.zeros(len(table), bool), np.zeros(len(table), bool)
    hidden[roles.hidden], in_pool[roles.pool] = True, True
    p = np.asarray(p_wrong, float)
    scored = np.isfinite(p)
    if (hidden & scored).any() and (in_pool & scored).any():
        checks.append(balance_check(np.where(scored, p, 0.0)[:, None], ["P(judge wrong)"], hidden & scored,
                                    in_pool & scored, types, by="audit score", seed=config.seed))  # fmt: skip
    return tuple(checks)
