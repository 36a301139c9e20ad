"""Where puaudit keeps what it reuses across runs: one root, one folder per kind.

    $PUAUDIT_CACHE (default ~/.cache/puaudit)/
        embeddings/   encoded comparison inputs           (puaudit_jax.audit.embed)
        judges/       judge responses                     (puaudit_jax.judges)
        gguf/         converted GGUF weights               (probes.models.gguf_convert)
        jax/          XLA's compiled programs              (:func:`enable_compilation_cache`)

Every cache is keyed by content (a changed input, model or program is a miss, never a stale hit), so
deleting a folder only costs time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

KINDS = ("embeddings", "judges", "gguf", "jax")
#: Programs that compile faster than this are not written to the persistent cache (JAX's default is 1 s;
#: a solver's program compiles in about 1 s on a 2-core machine, and reading it back takes milliseconds).
MIN_COMPILE_SECONDS = 0.2


def cache_root() -> Path:
    """``$PUAUDIT_CACHE``, else ``~/.cache/puaudit``."""
    root = os.environ.get("PUAUDIT_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "puaudit"


def cache_dir(kind: str) -> Path:
    """The folder of one kind of cache (one of :data:`KINDS`) under :func:`cache_root`."""
    if kind not in KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; one of {', '.join(KINDS)}")
    return cache_root() / kind


def enable_compilation_cache(path: str | Path | None = None) -> Path | None:
    """Keep XLA's compiled programs across processes: the second run of a command skips compilation.

    The ``puaudit`` command calls it; a library user calls it once, before the first solve::

        from puaudit_runtime.cache import enable_compilation_cache
        enable_compilation_cache()  # $PUAUDIT_CACHE/jax

    Args:
        path: the folder (default :func:`cache_dir` ("jax")).

    Returns:
        The folder in use, or None when the user already set JAX's own cache (``JAX_COMPILATION_CACHE_DIR``
        or ``jax.config.jax_compilation_cache_dir``), which is then left alone.

    Before JAX is imported the settings go through the environment (JAX reads them when it starts), so a
    command that needs no JAX never imports it; afterwards through ``jax.config``.
    """
    jax = sys.modules.get("jax")
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or (jax is not None and jax.config.jax_compilation_cache_dir):
        return None
    folder = Path(path) if path is not None else cache_dir("jax")
    if jax is None:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(MIN_COMPILE_SECONDS)
        return folder
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder
