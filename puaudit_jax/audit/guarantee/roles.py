"""Which rows calibrate the guarantee, which the audit fits on, and which it decides (:class:`RowRoles`).

Half of the labelled rows (per question type; a ``cluster_by`` group stays whole) have their labels
hidden from the audit, which fits everything it fits on the other half: the hidden rows are then rows
the audit scored as it scores the pool, so (when the labelled rows are a random sample of the pool) they
test the fitted P(judge wrong). The label-free candidate was fitted on no label: every labelled row tests it.

Human ties (``AuditConfig.human_ties``): with "exclude" (Jung et al.) a labelled row a human tied
calibrates nothing and the guarantee covers the rows a human would pick a side on; with "disagree" it
calibrates as a row every final verdict disagrees with, and the guarantee covers every pool row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...datasets.exclusions import EXCLUDED, LABELLED, UNLABELLED, item_status
from ...datasets.verdicts import MISSING, TIE
from ..calibration import crossfit_folds
from .testing import min_rows

#: The exclusion reasons of a row whose only fault is that a human tied (``item_status``).
TIE_REASONS = ("human tie", "human split vote")


@dataclass(frozen=True)
class RowRoles:
    """Row indices (into the comparison table) of each role the guarantee gives, each sorted.

    Attributes:
        hidden: labelled rows whose labels the audit never saw (they test the fitted candidates).
        labelled: every labelled row that calibrates (they test the label-free candidate; ``hidden`` among
            them): a human side, or with human_ties "disagree" a human tie.
        pool: the unlabelled rows to decide (the audit's pool, without the hidden rows).
        fit: the labelled rows the audit fitted on.
        ties: the labelled rows a human tied (calibrating as disagreement with "disagree", else left out).
    """

    hidden: np.ndarray = field(repr=False)
    labelled: np.ndarray = field(repr=False)
    pool: np.ndarray = field(repr=False)
    fit: np.ndarray = field(repr=False)
    ties: np.ndarray = field(repr=False)


def calibration_rows(types: np.ndarray, clusters: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """(n_L,) bool: the half of the labelled rows whose labels are hidden from the audit.

    Args:
        types: (n_L,) question type of each labelled row (each type split in half).
        clusters: (n_L,) cluster of each labelled row (kept whole), or None.
        rng: the generator that draws the split.
    """
    return crossfit_folds(types, clusters, 2, rng) == 0


def cascade_status(table: pd.DataFrame, judges: tuple[str, ...] = ()) -> np.ndarray:
    """(n,) ``item_status`` of every row for a cascade whose later judges' verdicts are the columns ``judges``.

    A row is usable (labelled or unlabelled) when any judge of the cascade has a verdict for it: where the
    first judge said tie, the next ones decide. Without ``judges``, the first judge's status.
    """
    status = item_status(table)["status"].to_numpy(dtype=object)
    for name in judges:
        later = item_status(table.assign(judge=table[name]))["status"].to_numpy(dtype=object)
        status = np.where(status == EXCLUDED, later, status)
    return status


def calibrating_status(table: pd.DataFrame, judges: tuple[str, ...], human_ties: str) -> np.ndarray:
    """(n,) :func:`cascade_status`, where a row a human tied counts as labelled with ``human_ties`` "disagree".

    Such a row is one the cascade decides (it would be in the pool without its label) that a human labelled
    without picking a side: with "disagree" it calibrates as a row every final verdict disagrees with.

    Args:
        table: the comparison table.
        judges: the cascade's later judges' columns (empty for the judge alone).
        human_ties: the setting; "disagree" turns those tied rows labelled.
    """
    status = cascade_status(table, judges)
    if human_ties != "disagree":
        return status
    blind = cascade_status(table.assign(human=MISSING), judges)
    tied = (blind == UNLABELLED) & (table["human"].to_numpy(dtype=object) == TIE)
    return np.where(tied, LABELLED, status)


def hidden_rows(status: np.ndarray, types: np.ndarray, table, config) -> np.ndarray:
    """Row indices of the labelled rows whose labels are hidden from the audit, sorted.

    Args:
        status: (n,) :func:`calibrating_status` of every row of the comparison table.
        types: (n,) question types.
        table: the comparison table (its ``config.cluster_by`` column, when set).
        config: the audit's settings (``seed``, ``cluster_by``, ``guarantee``, ``delta``).

    Raises:
        ValueError: fewer labelled rows than could certify anything (all of them agreeing, at the whole delta).
    """
    labelled = np.flatnonzero(np.asarray(status) == LABELLED)
    need = min_rows(config.guarantee, config.delta)
    if len(labelled) < need:
        raise ValueError(f"guarantee {config.guarantee:g} at delta {config.delta:g} needs at least {need} labelled "
                         f"rows (all of them agreeing with the judge); the data have {len(labelled)}: label more rows "
                         "(a random sample), or ask for a lower guarantee or a larger delta")  # fmt: skip
    clusters = None
    if config.cluster_by is not None:
        clusters = table[config.cluster_by].astype(str).to_numpy(dtype=object)[labelled]
    rng = np.random.default_rng([config.seed, 2407_18370])  # its own stream: the audit's splits are unchanged
    return np.sort(labelled[calibration_rows(np.asarray(types, dtype=object)[labelled], clusters, rng)])


def row_roles(status: np.ndarray, hidden: np.ndarray, audit_role: np.ndarray, truth: np.ndarray) -> RowRoles:
    """The :class:`RowRoles` of an audit run with the ``hidden`` rows' labels hidden.

    Args:
        status: (n,) :func:`calibrating_status` of every row (labelled: calibrates).
        hidden: (k,) the rows whose labels were hidden (:func:`hidden_rows`).
        audit_role: (n,) the roles the audit gave (its pool "U" holds the hidden rows it scored).
        truth: (n,) the human verdicts before hiding.
    """
    status, role = np.asarray(status, dtype=object), np.asarray(audit_role, dtype=object)
    labelled = np.flatnonzero(status == LABELLED)
    is_hidden = np.isin(np.arange(len(status)), hidden)
    tied = np.flatnonzero((status == LABELLED) & (np.asarray(truth, dtype=object) == TIE))
    return RowRoles(
        hidden=np.asarray(hidden, int)[role[hidden] == "U"],
        labelled=labelled,
        pool=np.flatnonzero((role == "U") & ~is_hidden),
        fit=np.flatnonzero((status == LABELLED) & ~is_hidden & (role != "excluded")),
        ties=tied,
    )
