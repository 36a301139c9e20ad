"""Step 1 of PUAudit (PUAudit §3.2, Appendix A.4, Algorithm 1 lines 3-6): F(x, o) for both sides.

The audit needs, for every usable comparison, the frozen encoder's embedding of the prompt with
each response: ``e_a = F(x, o_A)`` and ``e_b = F(x, o_B)``, both (d,). They are held in a
:class:`PairEmbeddings` (ids + two (n, d) float arrays) and can come from

- a file (``.npz`` with arrays ``id`` (n,), ``a`` (n, d), ``b`` (n, d); see :func:`load_embeddings`),
- any :data:`Encoder`: a callable ``list[input] -> (n, d) array`` where an input is what
  :func:`pair_inputs` builds (a string, or a list of chat messages for multi-turn items),
- the Flax ports in :mod:`probes` through :func:`probes_encoder` (``"minilm"``, ``"smollm2"`` or a
  local model folder), with probes' content-hash disk cache; its settings are an :class:`EmbedConfig`,
  the command line's, so the API and ``puaudit`` encode alike and share the cache.

Inputs are the paper's format ``"<|user|>" + x + "<|assistant|>" + o`` (Appendix A.4); for an
MT-Bench turn-2 item, x is the side's own conversation so far (user turn 1, that model's answer 1,
user turn 2), so each side is embedded in its own context, as GPT-4 judged it. Identical inputs
are encoded once (many comparisons share a response).
"""

from __future__ import annotations

import functools
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit_runtime.files import atomic_path

from ..datasets.exclusions import EXCLUDED, item_status
from .config import ENCODE_OPTIONS, EmbedConfig, default_cache_dir  # here before: a light module, for the CLI's parser

Encoder = Callable[[list], np.ndarray]
"""A frozen encoder: a list of n inputs (str or chat message lists) -> (n, d) float array."""


@dataclass(frozen=True)
class PairEmbeddings:
    """F(x, o_A) and F(x, o_B) per comparison id.

    ids: (n,) str; a, b: (n, d) float32. ``source`` says where they came from (for reports);
    ``encoding``: what the encoder reported about its inputs (distinct inputs, token cap and policy,
    inputs over the cap, tokens cut, served from the cache), None when unknown (e.g. from a file).
    """

    ids: np.ndarray
    a: np.ndarray
    b: np.ndarray
    source: str = ""
    encoding: dict | None = None

    def __post_init__(self):
        ids = np.asarray(self.ids).astype(str)
        a, b = np.asarray(self.a, np.float32), np.asarray(self.b, np.float32)
        if a.ndim != 2 or a.shape != b.shape or a.shape[0] != ids.shape[0]:
            raise ValueError(
                f"embeddings: ids {ids.shape}, a {a.shape}, b {b.shape} do not match (need ids (n,), a and b (n, d))"
            )
        dup = pd.Index(ids)[pd.Index(ids).duplicated()]
        if len(dup):
            raise ValueError(f"embeddings: {len(dup)} repeated ids, e.g. {dup[0]!r}")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def dim(self) -> int:
        """The embedding dimension d."""
        return int(self.a.shape[1])

    def take(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(e_a, e_b) rows for ``ids``, in that order; KeyError-free (caller checked coverage)."""
        pos = pd.Index(self.ids).get_indexer(list(ids))
        if (pos < 0).any():
            missing = [i for i, p in zip(ids, pos) if p < 0]
            raise ValueError(f"embeddings missing for {len(missing)} ids, e.g. {missing[:3]}")
        return self.a[pos], self.b[pos]


def save_embeddings(emb: PairEmbeddings, path: str | Path) -> Path:
    """Write ``emb`` as .npz (``id``, ``a``, ``b``, ``source``) atomically; returns the path."""
    path = Path(path)
    with atomic_path(path, prefix=".tmp-") as tmp, open(tmp, "wb") as fh:  # a file object: no ".npz" appended
        np.savez(fh, id=emb.ids, a=emb.a, b=emb.b, source=np.asarray(emb.source))
    return path


def load_embeddings(path: str | Path) -> PairEmbeddings:
    """Read an .npz written by :func:`save_embeddings` (arrays ``id``, ``a``, ``b``).

    A file that is not such an .npz is a ValueError naming it.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("id", "a", "b") if k not in data]
            if missing:
                raise ValueError(f"missing arrays {missing}; need id (n,), a (n, d), b (n, d)")
            source = str(data["source"]) if "source" in data else str(path)
            return PairEmbeddings(data["id"], data["a"], data["b"], source=source)
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as err:
        raise ValueError(f"{path}: not a readable embeddings .npz ({err})") from None


def side_input(question, history, response: str) -> str:
    """The paper's encoder input for one side: ``"<|user|>" + x + "<|assistant|>" + o``.

    Multi-turn x is rendered as alternating user / assistant turns, each turn tagged.

    Args:
        question: the user text, or the list of user turns.
        history: that side's earlier answers (one fewer than the user turns; None for single-turn).
        response: the side's judged answer.

    Raises:
        ValueError: a number of earlier answers other than the user turns less one.
    """
    if isinstance(question, str):
        return "<|user|>" + question + "<|assistant|>" + response
    turns = list(question)
    earlier = [] if history is None or (not isinstance(history, (list, tuple, np.ndarray))) else list(history)
    if len(earlier) != len(turns) - 1:
        raise ValueError(f"{len(turns)} user turns need {len(turns) - 1} earlier answers, got {len(earlier)}")
    parts = []
    for k, user in enumerate(turns):
        parts.append("<|user|>" + user + "<|assistant|>" + (earlier[k] if k < len(earlier) else response))
    return "".join(parts)


def pair_inputs(table: pd.DataFrame, judges: tuple[str, ...] = ()) -> tuple[list[str], list[str], list[str]]:
    """(ids, inputs for side A, inputs for side B) of the rows that are not excluded.

    ``judges``: columns of other judges' verdicts (a cascade's): a row usable under any of them is kept too.
    """
    keep = np.zeros(len(table), bool)
    for verdicts in (table["judge"], *(table[j] for j in judges)):
        keep |= (item_status(table.assign(judge=verdicts))["status"] != EXCLUDED).to_numpy()
    has_hist = "history_a" in table.columns and "history_b" in table.columns
    ids, xa, xb = [], [], []
    for row, record in enumerate(table.to_dict(orient="records")):
        if not keep[row]:
            continue
        q = record["question"]
        ha = record.get("history_a") if has_hist else None
        hb = record.get("history_b") if has_hist else None
        if isinstance(q, str):
            ha = hb = None
        ids.append(str(record["id"]))
        xa.append(side_input(q, ha, record["response_a"]))
        xb.append(side_input(q, hb, record["response_b"]))
    return ids, xa, xb


def embed_comparisons(table: pd.DataFrame, encoder: Encoder, *, source: str = "encoder",
                      judges: tuple[str, ...] = ()) -> PairEmbeddings:  # fmt: skip
    """Encode both sides of every non-excluded comparison, each distinct input once.

    Args:
        table: the comparison table.
        encoder: texts -> an (n, d) array of embeddings.
        source: names the encoder in the result.
        judges: other judges' verdict columns (a cascade's); a row usable under any of them is encoded too.

    Returns:
        The :class:`PairEmbeddings` (float32, one row per encoded comparison).

    Raises:
        ValueError: no usable comparison, or an encoder output that is not (n, d).
    """
    ids, xa, xb = pair_inputs(table, judges)
    unique = list(dict.fromkeys(xa + xb))
    if not unique:
        raise ValueError("no usable comparison to embed (every row is excluded)")
    vectors = np.asarray(encoder(unique), np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(unique):
        raise ValueError(f"encoder returned shape {vectors.shape} for {len(unique)} inputs; need (n, d)")
    index = {text: k for k, text in enumerate(unique)}
    a = vectors[[index[t] for t in xa]]
    b = vectors[[index[t] for t in xb]]
    return PairEmbeddings(np.asarray(ids), a, b, source=source, encoding=getattr(encoder, "last_report", None))


def _encoding_summary(report) -> dict:
    """The JSON-able counts of a probes ``EncodeReport`` (see :attr:`PairEmbeddings.encoding`)."""
    return {"inputs": report.n_inputs, "max_length": report.max_length, "long_inputs": report.policy,
            "over_max_length": report.n_over_window, "tokens_cut": report.n_tokens_cut,
            "longest": report.longest, "cached": report.n_cached}  # fmt: skip


def probes_encoder(name: str | None = None, config: EmbedConfig | None = None, *, progress: bool = True, mesh=None,
                   **settings) -> Encoder:  # fmt: skip
    """An :data:`Encoder` backed by the Flax ports, with the settings ``puaudit`` uses unless told otherwise.

    The settings are an :class:`EmbedConfig` (one default each, the command line's), resolved by
    :meth:`EmbedConfig.resolved`: MiniLM reads 256 tokens and cuts the middle of longer inputs, as
    ``puaudit audit`` does, so the vectors and the disk cache's keys are the command line's. Pooling
    is the model's own (mean for MiniLM, last token for decoders). Inputs over the cap are said in
    one line on stderr ("[puaudit] 37 of 1,200 texts were longer than 256 tokens; ..."), once per call.

    Args:
        name: the encoder (``EmbedConfig.encoder``): "minilm", "smollm2" or a local model folder;
            None: the config's (default minilm).
        config: the embedding settings; None: ``EmbedConfig()``.
        progress: show a progress bar (stderr) that moves after every batch.
        mesh: a ``jax.sharding.Mesh`` each batch is split over (``probes.extract``, data parallel),
            or None; a mesh spanning several processes of a cluster (``jax.distributed``): each
            process encodes its share and every process gets all the rows
            (``probes.extract.encode_distributed``).
        **settings: fields of :class:`EmbedConfig` to change (``cache_dir``, ``no_cache``, ``encoding``)
            and the encoding settings of :data:`~puaudit_jax.audit.config.ENCODE_OPTIONS` (``batch_size``,
            ``max_length``, ``long_inputs``: set on its ``encoding``); ``cache_dir=None`` turns the disk
            cache off (as ``no_cache=True``), ``cache_dir="default"`` is the default folder.

    Returns:
        The encoder; its ``config`` is the resolved :class:`EmbedConfig`, ``encode_config`` the
        ``probes.extract.EncodeConfig`` it runs, ``last_report`` the counts of its last call.

    Raises:
        ValueError: a setting out of its range, or a cache folder that is a file.
        TypeError: a setting that is not a field of :class:`EmbedConfig`.
    """
    from probes.extract import encode, encode_distributed  # puaudit_jax -> probes, never the other way
    from probes.models import load_pretrained

    cfg = _embed_settings(name, config, settings)
    encode_config = cfg.encode_config(progress=progress)
    pre = load_pretrained(cfg.encoder)
    cache = None if cfg.no_cache else (cfg.cache_dir or default_cache_dir())
    say = functools.partial(_say_long_inputs, head_fraction=encode_config.head_fraction)

    def encoder(inputs: list) -> np.ndarray:
        if mesh is not None and mesh.is_multi_process:  # each process on a mesh of its own devices
            out, report = encode_distributed(pre, list(inputs), encode_config, cache_dir=cache, on_long_inputs=say)
        else:
            out, report = encode(pre, list(inputs), encode_config, cache_dir=cache, mesh=mesh, on_long_inputs=say)
        encoder.last_report = _encoding_summary(report)
        return np.asarray(out, np.float32)

    encoder.__name__ = f"probes:{cfg.encoder}"
    encoder.config, encoder.encode_config = cfg, encode_config
    return encoder


def _embed_settings(name: str | None, config: EmbedConfig | None, settings: dict) -> EmbedConfig:
    """The resolved, checked :class:`EmbedConfig` of :func:`probes_encoder`'s arguments.

    ``settings``: fields of :class:`EmbedConfig`, and the encoding settings of :data:`ENCODE_OPTIONS`
    (set on its ``encoding``).
    """
    config = config or EmbedConfig()
    settings = dict(settings)
    if "cache_dir" in settings and settings["cache_dir"] in (None, "default"):  # the keyword's meanings before
        settings["no_cache"] = settings.get("no_cache", False) or settings["cache_dir"] is None
        settings["cache_dir"] = None
    encoding = {key: settings.pop(key) for key in ENCODE_OPTIONS if key in settings}
    unknown = sorted(set(settings) - {f.name for f in fields(EmbedConfig)})
    if unknown:
        known = f"fields of EmbedConfig or {list(ENCODE_OPTIONS)}"
        raise TypeError(f"probes_encoder: unknown settings {unknown}; use {known}")
    if "cache_dir" in settings and settings["cache_dir"] is not None:
        settings["cache_dir"] = str(settings["cache_dir"])
    cfg = replace(config, **settings, encoder=name or settings.get("encoder") or config.encoder)
    cfg = replace(cfg, encoding=replace(cfg.encoding, **encoding)) if encoding else cfg
    cfg.validate()
    return cfg.resolved()


def _say_long_inputs(report, head_fraction: float) -> None:
    """One line on stderr: how many inputs were over the cap, and what was kept of them."""
    print(long_inputs_line(report, head_fraction), file=sys.stderr, flush=True)


def long_inputs_line(report, head_fraction: float) -> str:
    """The line "[puaudit] 37 of 1,200 texts were longer than 256 tokens; kept ..." of a probes ``EncodeReport``.

    Args:
        report: the encoder's report (inputs, cap, policy, inputs over the cap, tokens cut).
        head_fraction: the share of the cap "middle_out" keeps from the start.
    """
    from probes.extract import middle_out_split

    cap, cut = report.max_length, report.n_tokens_cut
    if report.policy == "middle_out":
        head, tail = middle_out_split(cap, head_fraction)
        kept = f"kept their first {head:,} and last {tail:,} tokens (middle_out, {cut:,} tokens cut)"
    elif report.policy == "truncate":
        kept = f"kept their first {cap:,} tokens (truncate, {cut:,} tokens cut)"
    else:
        kept = f"encoded each as overlapping {cap:,}-token windows, averaged ({report.policy})"
    return (f"[puaudit] {report.n_over_window:,} of {report.n_inputs:,} texts were longer than {cap:,} tokens; "
            f"{kept}; --max-length / --long-inputs (max_length / long_inputs) choose otherwise")  # fmt: skip


def table_embeddings(table: pd.DataFrame, config: EmbedConfig, *, mesh=None, progress: bool = True,
                     judges: tuple[str, ...] = ()) -> PairEmbeddings:  # fmt: skip
    """F(x, o_A), F(x, o_B) of every usable row of ``table`` with the probes encoder ``config`` names.

    Args:
        table: the comparison table.
        config: the encoder's settings.
        mesh: a device mesh that splits the texts, or None.
        progress: whether to show progress bars.
        judges: a cascade's other judges; a row usable under any of them is encoded too.

    Returns:
        The :class:`PairEmbeddings`, its source naming the encoder and its settings.
    """
    encoder = probes_encoder(config=config, progress=progress, mesh=mesh)
    cfg = encoder.config
    enc = cfg.encoding
    settings = f"max_length={enc.max_length or 'window'}, long_inputs={enc.long_inputs or 'default'}"
    return embed_comparisons(table, encoder, source=f"probes:{cfg.encoder} ({settings})", judges=judges)
