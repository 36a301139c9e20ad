"""The content-hash embedding cache on disk: npz shards, written atomically, checked when read.

`encode(..., cache_dir=)` keys a model's rows by the model fingerprint, the settings that change
the vectors and each input's content (`cache_namespace`, `EmbeddingCache.key`), so repeated audits
do not re-encode. Every setting of `EncodeConfig` changes the key except those it names as changing
nothing but rounding or speed (`EncodeConfig.ROW_NEUTRAL`: batch size, padding side, micro-batches,
progress, cache shard size); the resolved long-input rule (`LongInputRule`: cap, policy, window
overlap, special tokens) is part of the key too, so a changed default cannot serve stale rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
import uuid
import warnings
import zipfile
from pathlib import Path

import numpy as np

from probes.encode_config import EncodeConfig
from puaudit_runtime.files import atomic_path

from .long_inputs import LongInputRule

__all__ = ["EmbeddingCache", "cache_namespace"]

_HEX_KEY = re.compile(r"^[0-9a-f]{64}$")
STALE_TEMP_S = 3600  # a temporary shard older than this belongs to a killed writer


def shard_checksum(keys: list[str], values: np.ndarray) -> str:
    """The sha256 hex digest of a shard's keys (k,) and values (k, ...): their bytes, dtype and shape."""
    values = np.ascontiguousarray(values)
    h = hashlib.sha256()
    h.update("\n".join(keys).encode())
    h.update(f"|{values.dtype.str}|{values.shape}|".encode())
    h.update(values.tobytes())
    return h.hexdigest()


def _read_shard(path: Path, row_shape: tuple | None) -> tuple[list[str], np.ndarray]:
    """(keys, values (k, *row_shape)) of one shard; ValueError saying what is wrong with it.

    The shard's ``checksum`` (:func:`shard_checksum`, written with it) must match its keys and values:
    values rewritten with other well-formed numbers are damage too. A shard without a checksum
    (written before checksums were) counts as damaged: it is recomputed once, then has one.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            if "keys" not in z or "values" not in z:
                raise ValueError(f"arrays {sorted(z.files)}, need keys and values")
            if "checksum" not in z:
                raise ValueError("no checksum (written before checksums were, or rewritten)")
            keys, values, checksum = z["keys"].tolist(), np.asarray(z["values"]), str(z["checksum"])
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise ValueError(f"unreadable: {type(err).__name__}: {err}") from None
    if values.ndim < 1 or len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but values of shape {values.shape}")
    if row_shape is not None and values.shape[1:] != tuple(row_shape):
        raise ValueError(f"rows of shape {values.shape[1:]}, this model and setting give {tuple(row_shape)}")
    if not all(isinstance(k, str) and _HEX_KEY.match(k) for k in keys):
        raise ValueError("keys are not content hashes")
    if not np.isfinite(values).all():
        raise ValueError("non-finite values")
    if shard_checksum(keys, values) != checksum:
        raise ValueError("checksum mismatch: the keys or values changed after the shard was written")
    return keys, values


class EmbeddingCache:
    """Content-hash cache: `root/<namespace>/part-*.npz`, each with `keys` (str) and `values`.

    Every shard is written with a ``checksum`` (:func:`shard_checksum`: sha256 of its keys and
    values) and checked when read (:func:`_read_shard`: readable, keys are hashes, one row per
    key of ``row_shape`` when given, finite, the checksum matches); a damaged one is reported with
    its path (a RuntimeWarning), removed, and its rows are recomputed by the caller. Shards
    written before checksums (none stored) are treated as damaged the same way: recomputed once.
    Temporary shards left by writers killed more than :data:`STALE_TEMP_S` seconds ago are removed.
    """

    def __init__(self, root: str | Path, namespace: str, row_shape: tuple | None = None):
        self.dir = Path(root) / namespace
        self.row_shape = None if row_shape is None else tuple(row_shape)
        self._mem: dict[str, np.ndarray] | None = None

    @staticmethod
    def key(item) -> str:
        """The cache key of ``item`` (JSON-serialisable): its sha256 hex digest."""
        return hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()

    def load(self) -> dict[str, np.ndarray]:
        """All cached rows {key: row}, read from the shards once (damaged shards removed)."""
        if self._mem is None:
            self._mem = {}
            if self.dir.is_dir():
                for f in sorted(self.dir.glob("part-*.npz")):
                    self._load_shard(f)
                self._remove_stale_temporaries()
        return self._mem

    def _load_shard(self, path: Path) -> None:
        try:
            keys, values = _read_shard(path, self.row_shape)
        except ValueError as err:
            warnings.warn(f"probes.extract: damaged cache shard {path} ({err}); removed, its rows are recomputed",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
            path.unlink(missing_ok=True)
            return
        self._mem.update(zip(keys, values))

    def _remove_stale_temporaries(self) -> None:
        now = time.time()
        for f in self.dir.glob(".part-*"):
            try:
                if now - f.stat().st_mtime > STALE_TEMP_S:
                    f.unlink()
            except FileNotFoundError:  # its writer finished or another reader removed it
                pass

    def put(self, keys: list[str], values: np.ndarray) -> None:
        """Store ``values`` (one row per key) as a new shard, atomically, and in memory."""
        if not keys:
            return
        # a new shard under a unique name: concurrent writers never replace each other's shards
        values = np.asarray(values)
        with atomic_path(self.dir / f"part-{uuid.uuid4().hex}.npz", prefix=".part-") as tmp:
            np.savez(tmp, keys=np.asarray(keys), values=values, checksum=np.asarray(shard_checksum(keys, values)))
        self.load().update(zip(keys, values))


def cache_namespace(fingerprint: str, config: EncodeConfig, rule: LongInputRule) -> str:
    """The cache folder name of a model and its settings: 24 hex digits.

    Args:
        fingerprint: the model's (`Pretrained.fingerprint`: config, dtype, weight files).
        config: the extraction settings; `EncodeConfig.cache_settings` are keyed.
        rule: the resolved long-input rule of the model and `config` (`long_input_rule`).
    """
    return EmbeddingCache.key([fingerprint, config.cache_settings(), dataclasses.asdict(rule)])[:24]
