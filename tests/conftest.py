"""Fixtures shared by the test folders (plain helpers are in tests/helpers.py).

Process hygiene (autouse)
    _release_executables  after each test module, drop JAX's compiled executables: each holds a
                          few memory maps, and the whole suite in one process would otherwise pass
                          the kernel's vm.max_map_count (65530), where XLA's next compile crashes
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
import sys

import numpy as np
import pytest

from tests.helpers import make_tiny_char_decoder, make_tiny_decoder, unit

# --------------------------------------------------------------------------------------------------
# process hygiene


@pytest.fixture(scope="module", autouse=True)
def _release_executables():
    yield
    if "jax" in sys.modules:  # a module that never imported JAX has nothing to release
        sys.modules["jax"].clear_caches()
        gc.collect()


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
