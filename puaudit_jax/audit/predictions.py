"""The audit's expected human verdicts, as predictions that PPI++ may use (``puaudit_jax.quantify``).

PPI++ stays valid with any predictions provided no prediction saw its own label: the audit runs
with the tie labels hidden (it learns only from A/B labels and would otherwise exclude those rows,
their prediction then depending on their own label), and in a coverage study with every label
outside the split hidden.

    tie_hidden_audit(table, features)                    one such audit (its items and report)
    audit_for_quantify(table, features)                  the items of one such audit
    audit_split_predictions(table, features, masks)      (S, R) predictions, one audit per split
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..datasets.verdicts import MISSING, TIE
from ..quantify.targets import audit_predictions
from .config import AuditConfig
from .pipeline import AuditResult, run_audit


def tie_hidden_audit(table: pd.DataFrame, features, config=None) -> AuditResult:
    """The audit of ``table`` whose predictions PPI++ may use: run with the tie labels hidden.

    Those rows are then scored like the pool (the audit learns only from A/B labels and would otherwise
    exclude them, their prediction then depending on their own label). The result's report says what the
    audit left out (``AuditReport.evidence_warnings``).

    Args:
        table: the comparison table.
        features: embeddings of every row (PairEmbeddings or an encoder).
        config: the AuditConfig (None: the default calibrated audit).
    """
    hidden = table.assign(human=np.where(table["human"].to_numpy(dtype=object) == TIE, MISSING, table["human"]))
    return run_audit(hidden, features, config or AuditConfig())


def audit_for_quantify(table: pd.DataFrame, features, config=None) -> pd.DataFrame:
    """The items of :func:`tie_hidden_audit` (its predictions are valid for PPI++).

    Args:
        table: the comparison table.
        features: embeddings of every row (PairEmbeddings or an encoder).
        config: the AuditConfig (None: the default calibrated audit).
    """
    return tie_hidden_audit(table, features, config).items


def audit_split_predictions(
    table: pd.DataFrame, features, masks: np.ndarray, audit_config: AuditConfig | None = None, progress: bool = True
) -> np.ndarray:
    """The audit's expected human A-outcomes for each split of a coverage study.

    For split s the labels outside ``masks[s]`` are hidden and the audit runs on what is left, tie
    labels hidden too (:func:`audit_for_quantify`), so no prediction saw its own label.

    Args:
        table: the population, R rows (the human-labelled rows, as
            :func:`puaudit_jax.quantify.coverage.coverage_study` takes them).
        features: embeddings of every row (PairEmbeddings) or an encoder.
        masks: (S, R) bool, the labelled rows of each split.
        audit_config: the audit's settings (default :class:`AuditConfig`, a calibrated rule).
        progress: show a progress bar over the S audits.

    Returns:
        (S, R) float, :func:`puaudit_jax.quantify.targets.audit_predictions` of each split's audit.
    """
    out = np.empty(masks.shape)
    for s in tqdm(range(len(masks)), desc="audits", disable=not progress):
        split = table.assign(human=np.where(masks[s], table["human"].to_numpy(dtype=object), MISSING))
        out[s] = audit_predictions(split, audit_for_quantify(split, features, audit_config))
    return out
