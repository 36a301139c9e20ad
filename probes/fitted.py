"""A BoRP probe fitted from a data file, saved, loaded and applied (``puaudit probe fit | predict``).

    read_dialogues(path) -> (table, dialogues)        .jsonl / .json / .csv, row-numbered errors
    ProbeSpec                                         how the features are made: encoder, layer, prompt
    dialogue_features(spec, dialogues, mesh) -> (n, d)
    fit_probe(table, dialogues, target, spec, head_config, mesh) -> FittedProbe
    check_components(k, n_rows, n_features=None)      the largest k a probe can fit, else ValueError
    save_probe / load_probe                           the pickle file (written atomically)

Data: a ``messages`` column (a list of {"role", "content"}, the rated response last; JSON text in
csv) or ``prompt`` and ``response`` columns (one user turn, one assistant turn). Encoders: a decoder
("smollm2" or a local HF folder) gives contrastive states with the blind prompt or a rubric prompt
(:func:`probes.borp.rubric_probe`); an encoder ("minilm") gives the mean-pooled embedding of the
dialogue text (no contrastive prompt). A mesh splits the extraction batches' rows and the PLS fits'
samples over several devices (same results up to float rounding); the saved probe does not depend on it.
"""

from __future__ import annotations

import json
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit_runtime.checks import is_missing_text, row_label
from puaudit_runtime.files import atomic_path

from . import borp

__all__ = [
    "FittedProbe",
    "check_components",
    "dialogue_features",
    "fit_probe",
    "load_probe",
    "read_dialogues",
    "save_probe",
]


def _dialogues(table: pd.DataFrame, path: str) -> list[list[dict]]:
    """One list of {"role", "content"} per row; a malformed messages cell or a missing text names its row."""
    if "messages" in table:
        return [_messages(m, path, k) for k, m in enumerate(table["messages"])]
    if {"prompt", "response"} <= set(table.columns):
        for column in ("prompt", "response"):
            blank = [k for k, v in enumerate(table[column]) if is_missing_text(v)]
            if blank:
                raise ValueError(f"{path}: {row_label(path, blank[0])}, column {column!r}: no text (a blank or "
                                 f"missing cell; {len(blank)} such rows)")  # fmt: skip
        return [
            [{"role": "user", "content": str(q)}, {"role": "assistant", "content": str(r)}]
            for q, r in zip(table["prompt"], table["response"])
        ]
    raise ValueError(f"{path}: needs a 'messages' column or 'prompt' and 'response' columns")


def _messages(cell, path: str, row: int) -> list:
    """The messages of one cell: a list, or its JSON text."""
    if isinstance(cell, (list, tuple, np.ndarray)):
        return list(cell)
    if not isinstance(cell, str):
        raise ValueError(f"{path}: {row_label(path, row)}, column 'messages': no messages ({cell!r})")
    try:
        return json.loads(cell)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: {row_label(path, row)}, column 'messages': not JSON ({err})") from None


def read_dialogues(path: str) -> tuple[pd.DataFrame, list[list[dict]]]:
    """The table of ``path`` and its dialogues (one list of {"role", "content"} per row).

    Raises:
        ValueError: an unknown suffix, missing columns, or a row whose messages are malformed (named).
    """
    p = Path(path)
    if p.suffix == ".jsonl":
        table = pd.read_json(p, lines=True)
    elif p.suffix == ".json":
        table = pd.DataFrame(json.loads(p.read_text()))
    elif p.suffix == ".csv":
        table = pd.read_csv(p)
    else:
        raise ValueError(f"{path}: expected .jsonl, .json or .csv")
    msgs = _dialogues(table, path)
    for i, m in enumerate(msgs):
        if not m or not all(isinstance(t, dict) and {"role", "content"} <= set(t) for t in m):
            raise ValueError(f"{path}: {row_label(path, i)}: messages must be a non-empty list of {{role, content}}")
    return table, msgs


def prompt_spec(encoder: str, layer: int, scale: tuple[float, float], rubric: str | None, criterion: str) -> dict:
    """The feature spec saved with a probe: encoder, layer and the contrastive prompt's fields.

    Args:
        encoder: the model's name or folder (as :func:`~probes.models.load_pretrained` takes it).
        layer: the hidden-state layer the features come from.
        scale: (lowest, highest) score of the probe prompt's rating scale.
        rubric: the rubric text (a rubric probe), or None for the blind probe.
        criterion: what the rubric rates (used only with a rubric).

    Returns:
        ``{"encoder", "layer", "probe"}``, the probe a dict of :class:`~probes.borp.ProbePrompt`'s fields.
    """
    probe = borp.rubric_probe(criterion, rubric, scale=scale) if rubric else borp.blind_probe(scale)
    return dict(encoder=encoder, layer=layer, probe=dict(probe.__dict__))


def dialogue_features(spec: dict, dialogues: list, mesh=None) -> np.ndarray:
    """Features (n, d) of ``dialogues`` as ``spec`` (:func:`prompt_spec`) says.

    A decoder gives the contrastive vectors of the spec's probe prompt; an encoder the embedding of
    the turns' contents joined by spaces.

    Args:
        spec: a :func:`prompt_spec` dict.
        dialogues: n dialogues, each a list of chat messages (``{"role", "content"}``).
        mesh: a device mesh that splits the rows, or None for one device.

    Returns:
        The features, shape (n, d).

    Raises:
        ValueError: a layer the model lacks (before any work).
    """
    from .models import load_pretrained
    from .models.batching import resolve_layers

    pre = load_pretrained(spec["encoder"])
    resolve_layers(spec["layer"], pre.config.num_layers + 1)  # a layer the model lacks: an error before any work
    if pre.config.is_decoder:
        probe = borp.ProbePrompt(**{**spec["probe"], "scale": tuple(spec["probe"]["scale"])})
        V, _ = borp.contrastive_vectors(pre, dialogues, [probe], layers=spec["layer"], progress=True, mesh=mesh)
        return V[:, 0]
    from .extract import EncodeConfig, encode

    texts = [" ".join(t["content"] for t in m) for m in dialogues]
    return encode(pre, texts, EncodeConfig(layers=spec["layer"], progress=True), mesh=mesh)[0]


@dataclass(frozen=True)
class FittedProbe:
    """A fitted probe.

    Attributes:
        spec: how its features are made (:func:`prompt_spec`).
        head: the fitted :class:`probes.borp.BorpHead`.
        n_train: rows it was fitted on.
        n_features: feature dimension d.
        in_sample: :func:`probes.borp.agreement` of its fitted values (empty when the scores are constant).
    """

    spec: dict
    head: borp.BorpHead
    n_train: int
    n_features: int
    in_sample: dict

    def predict(self, dialogues: list, mesh=None) -> np.ndarray:
        """(n,) predicted scores of ``dialogues``."""
        return self.head.predict(dialogue_features(self.spec, dialogues, mesh))

    @property
    def components(self) -> tuple[int, ...]:
        """The number of PLS / PCA components of each fitted head (after any resampling's limit)."""
        return tuple(int(m.n_components) for m in self.head.models_)


def check_components(k, n_rows: int, n_features: int | None = None, name: str = "n_components") -> int:
    """``k`` as an int when a probe on n_rows rows and n_features head features can fit it, else ValueError.

    The limit is min(n_rows - 1, n_features) (the rank of the centred features); scikit-learn's
    PLSRegression likewise refuses n_components above its bound instead of clipping it.

    Args:
        k: the requested number of components.
        n_rows: training rows n.
        n_features: the head's feature count (d + 2 with the geometric features), None if not yet known.
        name: how the error names k (``--components`` in the CLI).

    Raises:
        ValueError: k is not an integer in [1, the limit]; the message names ``name`` and the limit.
    """
    limit = n_rows - 1 if n_features is None else min(n_rows - 1, n_features)
    why = f"training rows - 1 = {n_rows - 1}" + ("" if n_features is None else f", head features = {n_features}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= limit:
        raise ValueError(f"{name}={k!r} is outside [1, {limit}]: the maximum is {limit} ({why})")
    return int(k)


def fit_probe(
    table: pd.DataFrame, dialogues: list, target: str, spec: dict, config: borp.HeadConfig, mesh=None
) -> FittedProbe:
    """Fit a BoRP head on the human scores in column ``target`` of ``table``.

    A resample with fewer distinct rows can lower a head's components: then a UserWarning says so, and
    :attr:`FittedProbe.components` records the values used.

    Args:
        table: one row per dialogue, with the human scores in column ``target``.
        dialogues: the n dialogues of the table's rows, in order (chat-message lists).
        target: the column of the human scores (finite numbers).
        spec: the feature spec (:func:`prompt_spec`).
        config: the head's settings; ``config.n_components`` above the limit of :func:`check_components`
            is an error (never clipped).
        mesh: a device mesh that splits the rows, or None for one device.

    Returns:
        The :class:`FittedProbe` (its agreement with the training scores empty when they are constant).

    Raises:
        ValueError: no such column, rows without a score (counted), or config.n_components above
            min(rows - 1, head features) (the maximum named).
    """
    if target not in table:
        raise ValueError(f"no column {target!r}")
    raw = table[target]
    y = pd.to_numeric(raw, errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~np.isfinite(y))
    if len(bad):
        raise ValueError(f"{len(bad)} rows without a finite {target!r} score, the first data row {bad[0] + 1} "
                         f"({raw.iloc[bad[0]]!r})")  # fmt: skip
    check_components(config.n_components, len(y))
    V = dialogue_features(spec, dialogues, mesh)
    check_components(config.n_components, len(y), V.shape[1] + (2 if config.geometric else 0))
    head = borp.BorpHead(config, mesh=mesh).fit(V, y)
    fitted = head.predict(V)
    probe = FittedProbe(spec, head, len(y), V.shape[1], borp.agreement(y, fitted) if np.ptp(y) > 0 else {})
    if min(probe.components) < config.n_components:
        warnings.warn(
            f"n_components={config.n_components}: the resampled training sets have too few distinct rows; "
            f"the heads were fitted with {min(probe.components)} to {max(probe.components)} components",
            UserWarning,
            stacklevel=2,
        )
    return probe


def save_probe(probe: FittedProbe, path: str | Path) -> None:
    """Pickle ``probe`` to ``path`` atomically (a dict of spec, head and n_train)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        pickle.dump(dict(spec=probe.spec, head=probe.head, n_train=probe.n_train), f)


# what unpickling a file that is not a probe (text, a truncated or foreign pickle) can raise
_NOT_A_PICKLE = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError, ValueError)


def load_probe(path: str | Path) -> FittedProbe:
    """A probe saved by :func:`save_probe` (only load files you trust: pickle runs code).

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not a probe written by :func:`save_probe` (``puaudit probe fit``), named.
    """
    not_a_probe = f"{path}: not a fitted probe written by `puaudit probe fit`"
    with open(path, "rb") as f:
        try:
            saved = pickle.load(f)
        except _NOT_A_PICKLE as err:
            raise ValueError(f"{not_a_probe} ({type(err).__name__}: {err})") from None
    if not (isinstance(saved, dict) and {"spec", "head", "n_train"} <= set(saved)):
        raise ValueError(f"{not_a_probe} (a pickled {type(saved).__name__} without spec, head and n_train)")
    if not isinstance(saved["head"], borp.BorpHead):
        raise ValueError(f"{not_a_probe} (its head is a {type(saved['head']).__name__}, not a BorpHead)")
    return FittedProbe(saved["spec"], saved["head"], saved["n_train"], 0, {})
