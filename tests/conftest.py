"""Fixtures shared by the test folders (plain helpers are in tests/helpers.py).

Compilation cache (session)
    JAX_COMPILATION_CACHE_DIR  set at import, before anything imports JAX: one persistent compilation
                          cache in a temporary folder for the whole session, its xdist workers and
                          every subprocess and cluster process they start (they inherit the
                          environment), so a program that took over a second to compile is
                          loaded, not compiled again, where another worker or child needs it;
                          removed at the end
Property tests
    hypothesis profiles   "repeatable" (the default): every run draws the same examples
                          (derandomize), so a red run is the code's doing and reruns the same; "explore":
                          fresh random examples each run (HYPOTHESIS_PROFILE=explore make test), to go
                          looking for new failures
Process hygiene (autouse)
    _release_executables  after a test module, drop JAX's compiled executables once the process
                          holds more than half of the kernel's vm.max_map_count memory maps (each
                          executable holds about 15; at the limit XLA's next compile crashes).
                          Below that they stay, so the next module reuses what is compiled
Randomness
    rng                   a numpy Generator seeded from the test's node id (CRC-32, not Python's salted
                          ``hash``): each test draws its own data, the same on every run and process
Numerics
    x64                   float64 JAX for the test (``with jax.enable_x64(True)``); a module that
                          needs it everywhere says ``pytestmark = pytest.mark.usefixtures("x64")``
Synthetic data (module scope: each test module gets its own copy, as when they were defined there)
    cone_points           (zp, zu, truth): P' in a cone around e_0 (25 points, d = 32), U = 30 cone
                          points then 20 near-orthogonal ones; truth marks the cone points of U
    cone_model            cone_comparisons(300 labelled, 600 unlabelled, d = 32, alpha = 0.7, seed 1)
    cone_files            (folder, data): cone_comparisons(120, 80, d = 16, seed 2) saved as
                          cmp.jsonl / emb.npz (the CLI tests)
    cone_files_devices    (folder, data): cone_comparisons(150, 450, d = 16, neg_range (0.2, 0.6),
                          seed 3) saved the same way (the multi-device CLI tests)
Bundled tables (module scope)
    mtbench               load_bundled("mtbench")
    llmfao4               load_bundled("llmfao-gpt4")
Models (module scope)
    tiny_decoder          helpers.make_tiny_decoder(): 3-layer random decoder, d = 48, no tokenizer
    tiny_char_decoder     helpers.make_tiny_char_decoder(): 3-layer random Llama, d = 32, char tokenizer
    minilm                load_pretrained("minilm")   (the bundled MiniLM port)
    smollm2               load_pretrained("smollm2")  (the bundled SmolLM2-135M-Instruct GGUF)

Library modules are imported inside the fixtures, so collecting one folder does not import the others.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import zlib

import numpy as np
import pytest
from hypothesis import settings

from tests.helpers import make_tiny_char_decoder, make_tiny_decoder, unit

# --------------------------------------------------------------------------------------------------
# compilation cache

_CACHE_OWNER = "PUAUDIT_TEST_JAX_CACHE_OWNER"


def _start_compilation_cache() -> None:
    """Point JAX's persistent compilation cache at a fresh temporary folder, unless one is set.

    Environment variables, not ``jax.config``: xdist workers, subprocesses and cluster processes
    inherit them and share the folder. Only programs that took over a second to compile are written
    (JAX's default threshold: writing every small one made the suite 20 % slower); a size limit turns
    on JAX's file lock, so processes that write and read the same entry at once never see half a file.
    """
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return  # a worker of this session, or a folder the user chose
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="puaudit-tests-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(16 << 30)
    os.environ[_CACHE_OWNER] = str(os.getpid())


_start_compilation_cache()


def pytest_unconfigure(config):
    if os.environ.get(_CACHE_OWNER) == str(os.getpid()):  # the process that made the folder removes it
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# property tests

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# --------------------------------------------------------------------------------------------------
# process hygiene


def _memory_maps() -> tuple[int, int]:
    """(memory maps this process holds, the kernel's limit); (1, 1) where /proc cannot tell."""
    try:
        with open("/proc/self/maps", "rb") as maps, open("/proc/sys/vm/max_map_count") as limit:
            return sum(1 for _ in maps), int(limit.read())
    except (OSError, ValueError):
        return 1, 1  # not Linux: release after every module, as a process near the limit would


@pytest.fixture(scope="module", autouse=True)
def _release_executables():
    yield
    held, limit = _memory_maps()
    if "jax" in sys.modules and held > limit // 2:  # a module that never imported JAX has nothing to release
        sys.modules["jax"].clear_caches()
        gc.collect()


# --------------------------------------------------------------------------------------------------
# randomness


@pytest.fixture
def rng(request) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# --------------------------------------------------------------------------------------------------
# numerics


@pytest.fixture
def x64():
    import jax

    with jax.enable_x64(True):
        yield


# --------------------------------------------------------------------------------------------------
# synthetic data


@pytest.fixture(scope="module")
def cone_points():
    """P' in a cone around e_0; U = 30 cone items then 20 items orthogonal to e_0."""
    rng = np.random.default_rng(0)
    d = 32
    centre = np.eye(d)[0]

    def cone_items(k, proj):
        u = rng.normal(size=(k, d))
        u[:, 0] = 0
        u = unit(u)
        return proj[:, None] * centre + np.sqrt(1 - proj**2)[:, None] * u

    zp = cone_items(25, rng.uniform(0.8, 1.0, 25))
    zu = np.r_[cone_items(30, rng.uniform(0.8, 1.0, 30)), cone_items(20, rng.uniform(-0.2, 0.2, 20))]
    truth = np.r_[np.ones(30, bool), np.zeros(20, bool)]
    return zp, zu, truth


@pytest.fixture(scope="module")
def cone_model():
    from puaudit_jax.audit.synthetic import cone_comparisons

    return cone_comparisons(n_labelled=300, n_unlabelled=600, d=32, alpha=0.7, seed=1)


def _saved_cone(folder, *args, **kw):
    from puaudit_jax.audit.embed import save_embeddings
    from puaudit_jax.audit.synthetic import cone_comparisons
    from puaudit_jax.datasets import save_comparisons

    data = cone_comparisons(*args, **kw)
    save_comparisons(data.table, folder / "cmp.jsonl")
    save_embeddings(data.embeddings, folder / "emb.npz")
    return folder, data


@pytest.fixture(scope="module")
def cone_files(tmp_path_factory):
    return _saved_cone(tmp_path_factory.mktemp("cli"), 120, 80, d=16, seed=2)


@pytest.fixture(scope="module")
def cone_files_devices(tmp_path_factory):
    return _saved_cone(tmp_path_factory.mktemp("cli-devices"), 150, 450, d=16, neg_range=(0.2, 0.6), seed=3)


# --------------------------------------------------------------------------------------------------
# bundled tables


@pytest.fixture(scope="module")
def mtbench():
    from puaudit_jax.datasets import load_bundled

    return load_bundled("mtbench")


@pytest.fixture(scope="module")
def llmfao4():
    from puaudit_jax.datasets import load_bundled

    return load_bundled("llmfao-gpt4")


# --------------------------------------------------------------------------------------------------
# models


@pytest.fixture(scope="module")
def tiny_decoder():
    return make_tiny_decoder()


@pytest.fixture(scope="module")
def tiny_char_decoder():
    return make_tiny_char_decoder()


@pytest.fixture(scope="module")
def minilm():
    from probes.models import load_pretrained

    return load_pretrained("minilm")


@pytest.fixture(scope="module")
def smollm2():
    from probes.models import load_pretrained

    return load_pretrained("smollm2")
