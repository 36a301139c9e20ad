"""Stage 1, ``prepare``: the comparison table and its embeddings as arrays (PUAudit §3.2, Alg. 1 l. 3-6).

Every row keeps its place: ``status`` marks it labelled (human A/B, judge A/B), unlabelled (human
missing, judge A/B) or excluded (ties, missing text, identical responses; :func:`item_status`),
and rows whose two embeddings coincide (zero difference vector) are excluded here too with
reason :data:`ZERO_DIFF`. Nothing is dropped: later stages index these (n,) arrays by row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..datasets.comparisons import check_histories
from ..datasets.exclusions import EXCLUDED, LABELLED, UNLABELLED, item_status
from ..datasets.verdicts import MISSING, question_types
from .config import AuditConfig
from .embed import Encoder, PairEmbeddings, embed_comparisons

ZERO_DIFF = "zero difference embedding"


@dataclass(frozen=True)
class AuditData:
    """The audit's input, one entry per input row (n rows, input order).

    Attributes:
        table: the comparisons (index 0..n-1).
        ids: (n,) object array of comparison ids (str).
        types: (n,) object array of question types, "(none)" where missing.
        judge: (n,) object array of judge verdicts.
        human: (n,) object array of human verdicts.
        status: (n,) object array: labelled, unlabelled or excluded.
        reason: (n,) object array: why a row is excluded.
        ea: (n, d) float64 F(x, o_A) (zeros on excluded rows).
        eb: (n, d) float64 F(x, o_B) (zeros on excluded rows).
        source: where the embeddings came from.
        encoding: the encoder's counts of long inputs (None when the embeddings came ready-made).
    """

    table: pd.DataFrame = field(repr=False)
    ids: np.ndarray
    types: np.ndarray
    judge: np.ndarray
    human: np.ndarray
    status: np.ndarray
    reason: np.ndarray
    ea: np.ndarray = field(repr=False)
    eb: np.ndarray = field(repr=False)
    source: str = ""
    encoding: dict | None = None

    @property
    def n(self) -> int:
        """Number of rows n."""
        return len(self.ids)

    @property
    def dim(self) -> int:
        """The embedding dimension d."""
        return int(self.ea.shape[1])

    @property
    def diff(self) -> np.ndarray:
        """(n, d) F(x, o_A) - F(x, o_B)."""
        return self.ea - self.eb

    @property
    def labelled(self) -> np.ndarray:
        """Row numbers of the usable human-labelled comparisons."""
        return np.flatnonzero(self.status == LABELLED)

    @property
    def unlabelled(self) -> np.ndarray:
        """Row numbers of the usable judge-only comparisons (the pool U)."""
        return np.flatnonzero(self.status == UNLABELLED)


def _check_table(table: pd.DataFrame, config: AuditConfig) -> None:
    if len(table) == 0:
        raise ValueError("the comparison table is empty")
    if config.cluster_by is not None and config.cluster_by not in table.columns:
        raise ValueError(
            f"cluster_by={config.cluster_by!r} is not a column of the comparisons (columns: {list(table.columns)})"
        )
    ids = pd.Index(table["id"].astype(str))
    if ids.duplicated().any():
        raise ValueError(f"repeated comparison ids, e.g. {ids[ids.duplicated()][0]!r}")


def _embeddings(table: pd.DataFrame, usable: np.ndarray, features: PairEmbeddings | Encoder) -> PairEmbeddings:
    if isinstance(features, PairEmbeddings):
        return features
    if callable(features):
        check_histories(table, source="the comparisons")  # each side's conversation, before encoding
        return embed_comparisons(table.iloc[usable], features, source=getattr(features, "__name__", "encoder"))
    raise TypeError(f"features must be PairEmbeddings or an encoder callable, got {type(features).__name__}")


def _check_embeddings(emb: PairEmbeddings, table_ids: pd.Index, usable_ids: list[str]) -> None:
    """Mismatched id sets and non-finite vectors are errors that name the ids."""
    emb_index = pd.Index(emb.ids)
    extra = emb_index.difference(table_ids)
    if len(extra):
        raise ValueError(
            f"embeddings have {len(extra)} ids that are not in the comparisons, "
            f"e.g. {list(extra[:3])} (mismatched id sets)"
        )
    missing = pd.Index(usable_ids).difference(emb_index)
    if len(missing):
        raise ValueError(
            f"{len(missing)} usable comparisons have no embeddings, e.g. {list(missing[:3])} (mismatched id sets)"
        )
    ea, eb = emb.take(usable_ids)
    bad = ~(np.isfinite(ea).all(1) & np.isfinite(eb).all(1))
    if bad.any():
        ids = [usable_ids[i] for i in np.flatnonzero(bad)[:3]]
        raise ValueError(f"{int(bad.sum())} comparisons have NaN or inf embeddings, e.g. {ids}")


def _zero_difference(ea: np.ndarray, eb: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """(n,) rows whose two embeddings coincide to 1e-6 of their scale (among ``usable``)."""
    scale = np.maximum(np.linalg.norm(ea, axis=1), np.linalg.norm(eb, axis=1))
    zero = np.linalg.norm(ea - eb, axis=1) <= 1e-6 * np.maximum(scale, 1e-30)
    return zero & np.isin(np.arange(len(ea)), usable)


def check_labelled(table: pd.DataFrame, source: str | None = None) -> None:
    """ValueError, before anything is encoded, when no row of ``table`` can be a labelled (P) row.

    The same check as the audit's after encoding, less the rows excluded for a zero difference embedding,
    which only the embeddings show.

    Args:
        table: the comparison table (columns ``id``, ``judge``, ``human`` and the texts).
        source: the table's name to begin the message with (a file or a bundled set), if any.
    """
    frame = item_status(table)
    status, reason = frame["status"].to_numpy(dtype=object), frame["reason"].to_numpy(dtype=object)
    if not (status == LABELLED).any():
        human = table["human"].to_numpy(dtype=object) if "human" in table else np.full(len(table), MISSING)
        raise ValueError(("" if source is None else f"{source}: ") + _no_labelled(status, reason, human))


def _excluded(status: np.ndarray, reason: np.ndarray) -> str:
    """``N excluded (reason: count, ...)``."""
    out = status == EXCLUDED
    reasons = pd.Series(reason[out]).value_counts()
    return f"{int(out.sum())} excluded" + (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})"
                                           if out.any() else "")  # fmt: skip


def _no_labelled(status: np.ndarray, reason: np.ndarray, human: np.ndarray) -> str:
    """Why P would be empty: the rows by status, and a table with no human verdict at all said so."""
    n_unl = int((status == UNLABELLED).sum())
    text = (f"no usable human-labelled comparison (P would be empty): {len(status)} rows, "
            f"{_excluded(status, reason)}, {n_unl} unlabelled")  # fmt: skip
    if (np.asarray(human, dtype=object) == MISSING).all():
        text += ("; the table has no human labels (no `human` column, or no row labelled A, B or tie): the audit "
                 "learns from human verdicts and a guarantee calibrates on them, so label a random sample of "
                 "rows first")  # fmt: skip
    return text


def _check_roles(status: np.ndarray, reason: np.ndarray, human: np.ndarray) -> None:
    """ValueError when no row is usable as P (labelled) or as U, with the exclusions counted by reason."""
    n, n_lab, n_unl = len(status), int((status == LABELLED).sum()), int((status == UNLABELLED).sum())
    if n_lab == 0:
        raise ValueError(_no_labelled(status, reason, human))
    excluded = _excluded(status, reason)
    if n_unl == 0:
        raise ValueError(
            f"no usable unlabelled comparison to audit (U is empty): {n} rows, {n_lab} labelled, {excluded}"
        )


def prepare(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, config: AuditConfig) -> AuditData:
    """Statuses, verdicts and embeddings of every row of ``comparisons``; errors name rows and ids.

    Args:
        comparisons: the comparison table (columns ``id``, ``question_type``, ``judge``, ``human`` and
            the texts).
        features: :class:`PairEmbeddings` covering every usable row (and no other id), or an
            :data:`Encoder` called on the usable rows' inputs.
        config: the audit's settings (``cluster_by`` must name a column).

    Returns:
        The :class:`AuditData`, one entry per row of ``comparisons``.

    Raises:
        ValueError: an empty table, repeated ids, a missing cluster column, a multi-turn row without
            its sides' earlier answers (with an encoder; named before anything is encoded),
            mismatched embedding ids, non-finite embeddings, or no usable labelled / unlabelled
            comparison.
        TypeError: ``features`` is neither embeddings nor an encoder.
    """
    table = comparisons.reset_index(drop=True)
    _check_table(table, config)
    ids = table["id"].astype(str).to_numpy()
    status_frame = item_status(table)
    status = status_frame["status"].to_numpy(dtype=object).copy()
    reason = status_frame["reason"].to_numpy(dtype=object).copy()
    usable = np.flatnonzero(status != EXCLUDED)
    check_labelled(table)
    emb = _embeddings(table, usable, features)
    _check_embeddings(emb, pd.Index(ids), list(ids[usable]))
    ea, eb = np.zeros((len(table), emb.dim)), np.zeros((len(table), emb.dim))
    if len(usable):
        ea[usable], eb[usable] = emb.take(list(ids[usable]))
    zero = _zero_difference(ea, eb, usable)
    status[zero], reason[zero] = EXCLUDED, ZERO_DIFF
    _check_roles(status, reason, table["human"].to_numpy(dtype=object))
    return AuditData(
        table=table,
        ids=ids,
        types=question_types(table["question_type"]),
        judge=table["judge"].to_numpy(dtype=object),
        human=table["human"].to_numpy(dtype=object),
        status=status,
        reason=reason,
        ea=ea,
        eb=eb,
        source=emb.source,
        encoding=emb.encoding,
    )
