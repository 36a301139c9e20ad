"""``puaudit_runtime.cache``: one root, a folder per kind; the compilation cache set without importing JAX."""

from __future__ import annotations

import subprocess
import sys

import pytest

from puaudit_runtime.cache import cache_dir

_CHILD = """
import os, sys
from puaudit_runtime.cache import MIN_COMPILE_SECONDS, enable_compilation_cache
folder = enable_compilation_cache({path!r})
assert "jax" not in sys.modules, "enable_compilation_cache imported jax"
import jax
assert jax.config.jax_compilation_cache_dir == str(folder) == {path!r}, jax.config.jax_compilation_cache_dir
assert jax.config.jax_persistent_cache_min_compile_time_secs == MIN_COMPILE_SECONDS
assert enable_compilation_cache() is None  # set now: left alone
print("ok")
"""


def test_the_compilation_cache_is_set_before_jax_starts_without_importing_it(tmp_path):
    env = {"PATH": "", "HOME": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _CHILD.format(path=str(tmp_path / "jax"))], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_user_set_jax_cache_is_left_alone(tmp_path, monkeypatch):
    from puaudit_runtime.cache import enable_compilation_cache

    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    assert enable_compilation_cache() is None


def test_an_unknown_cache_kind_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PUAUDIT_CACHE", str(tmp_path))
    assert cache_dir("jax") == tmp_path / "jax"
    with pytest.raises(ValueError, match="unknown cache kind 'models'"):
        cache_dir("models")
