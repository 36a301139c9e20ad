"""Checkpoint tensors -> Flax params trees.

* `read_safetensors(folder)` memory-maps `model.safetensors` or the shards listed in
  `model.safetensors.index.json` (a small header parser + `np.memmap`, so bf16 works through
  `ml_dtypes` and nothing is copied before it is needed).
* `hf_to_params(tensors, template, ...)` renames Hugging Face tensor names to the params tree of
  our modules (same names, `model.` / `bert.` prefixes dropped, per-layer tensors stacked on a
  leading axis) and checks every shape against the module's own (from `jax.eval_shape`).

Errors name the file and the tensor.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np

_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}

# Checkpoint tensors that our modules do not use (buffers, unused poolers).
_IGNORED = re.compile(r"(^|\.)(position_ids|rotary_emb\.inv_freq|masked_bias|attn\.bias)$|^pooler\.")


class LazyTensor:
    """A tensor inside a safetensors file; `.load()` returns a memory-mapped numpy view."""

    def __init__(self, path: Path, name: str, dtype, shape, start: int, end: int):
        self.path, self.name, self.dtype, self.shape = path, name, dtype, tuple(shape)
        self.start, self.end = start, end

    def load(self) -> np.ndarray:
        """The tensor as a read-only memory-mapped numpy array of its shape and dtype."""
        n = int(np.prod(self.shape)) if self.shape else 1
        arr = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.start, shape=(n,))
        return arr.reshape(self.shape)


def _read_header(path: Path) -> dict[str, LazyTensor]:
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(f.read(n))
        except ValueError:  # JSON or UTF-8 errors: a truncated or damaged file
            raise ValueError(f"{path}: damaged safetensors file (unreadable header)") from None
    base, size = 8 + n, path.stat().st_size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        if base + end > size:
            raise ValueError(
                f"{path}: truncated safetensors file: tensor {name!r} ends at byte {base + end}, the file has {size}"
            )
        out[name] = LazyTensor(path, name, _DTYPES[info["dtype"]], info["shape"], base + start, base + end)
    return out


def read_safetensors(folder: str | Path) -> dict[str, LazyTensor]:
    """All tensors of a HF folder: `model.safetensors` or a sharded index. Raises FileNotFoundError naming the file."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    single = folder / "model.safetensors"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        out = {}
        for shard in sorted(set(weight_map.values())):
            p = folder / shard
            if not p.is_file():
                raise FileNotFoundError(f"{p}: shard listed in {index.name} not found")
            out.update(_read_header(p))
        missing = [k for k in weight_map if k not in out]
        if missing:
            raise ValueError(f"{index}: tensors {missing[:5]} listed but not found in their shards")
        return out
    if single.is_file():
        return _read_header(single)
    raise FileNotFoundError(f"{single}: no model.safetensors or model.safetensors.index.json in {folder}")


def _flatten(tree, prefix=()):
    for k, v in tree.items():
        if isinstance(v, Mapping):
            yield from _flatten(v, prefix + (k,))
        else:
            yield prefix + (k,), v


def _set(tree: dict, path: tuple, value):
    for k in path[:-1]:
        tree = tree.setdefault(k, {})
    tree[path[-1]] = value


def _hf_name_to_path(name: str, strip_prefixes, stacked) -> tuple[tuple[str, ...], int | None]:
    """An HF tensor name -> (its path in the params tree, its layer index or None).

    The first matching prefix of `strip_prefixes` is removed and the first `<stacked>.<digits>`
    pair folded into the layer index: `model.layers.3.mlp.up_proj.weight` ->
    (("layers", "mlp", "up_proj", "weight"), 3).
    """
    key = name
    for p in strip_prefixes:
        if key.startswith(p):
            key = key[len(p) :]
            break
    parts = key.split(".")
    layer = None
    for i, part in enumerate(parts[:-1]):
        if part in stacked and parts[i + 1].isdigit():
            layer = int(parts[i + 1])
            parts = parts[: i + 1] + parts[i + 2 :]
            break
    return tuple(parts), layer


def _route_tensors(tensors: Mapping, expected: dict, source: str, strip_prefixes, stacked):
    """Sort checkpoint tensors by params path: (flat {path: tensor}, per_layer {path: {layer: tensor}}).

    Tensors the model does not use raise, except known buffers (`_IGNORED`).
    """
    per_layer: dict[tuple, dict[int, np.ndarray]] = {}
    flat: dict[tuple, np.ndarray] = {}
    unused = []
    for name, t in tensors.items():
        path, layer = _hf_name_to_path(name, strip_prefixes, stacked)
        if path not in expected:
            if _IGNORED.search(name):
                continue
            unused.append(name)
            continue
        if layer is None:
            flat[path] = t
        else:
            per_layer.setdefault(path, {})[layer] = t
    if unused:
        raise ValueError(
            f"{source}: checkpoint tensors not used by the model: {unused[:8]}"
            + (f" (+{len(unused) - 8} more)" if len(unused) > 8 else "")
        )
    return flat, per_layer


def _load_param(path: tuple, spec, flat: dict, per_layer: dict, source: str):
    """The array for one params leaf, its shape checked against `spec`.

    A flat tensor as is, a per-layer tensor stacked over its `spec.shape[0]` layers (all present, each of
    `spec.shape[1:]`).
    """
    name = ".".join(path)
    if path in flat:
        arr = flat[path]
        shape = tuple(arr.shape)
        if shape != tuple(spec.shape):
            raise ValueError(f"{source}: tensor {name!r} has shape {shape}, the model expects {tuple(spec.shape)}")
        return arr.load() if isinstance(arr, LazyTensor) else arr
    if path in per_layer:
        layers = per_layer[path]
        n = spec.shape[0]
        missing = [i for i in range(n) if i not in layers]
        if missing or len(layers) != n:
            raise ValueError(
                f"{source}: tensor {name!r}: layers {missing or sorted(layers)} missing/extra (expected {n} layers)"
            )
        for i in range(n):
            if tuple(layers[i].shape) != tuple(spec.shape[1:]):
                raise ValueError(
                    f"{source}: tensor {name!r} layer {i} has shape {tuple(layers[i].shape)}, "
                    f"the model expects {tuple(spec.shape[1:])}"
                )
        return np.stack([(layers[i].load() if isinstance(layers[i], LazyTensor) else layers[i]) for i in range(n)])
    raise ValueError(f"{source}: tensor {name!r} (shape {tuple(spec.shape)}) missing from the checkpoint")


def hf_to_params(
    tensors: Mapping[str, LazyTensor | np.ndarray],
    template,
    source: str,
    strip_prefixes=("model.", "bert."),
    dtype=jnp.float32,
    stacked=("layers", "layer"),
) -> dict:
    """Map HF tensor names onto ``template`` and check shapes.

    `layers.3.self_attn.q_proj.weight` -> params["layers"]["self_attn"]["q_proj"]["weight"][3].

    Args:
        tensors: the checkpoint's tensors by HF name (lazy or loaded).
        template: a params tree of ShapeDtypeStructs (the module's parameters).
        source: names the checkpoint in error messages.
        strip_prefixes: name prefixes removed before matching.
        dtype: the dtype of the returned parameters.
        stacked: the names of the per-layer collections stacked along a leading layer axis.

    Returns:
        The params tree of ``template``'s structure, as JAX arrays of ``dtype``.

    Raises:
        ValueError: a missing parameter, a shape that differs, or an unused checkpoint tensor other than
            a known buffer.
    """
    expected = dict(_flatten(template))
    flat, per_layer = _route_tensors(tensors, expected, source, strip_prefixes, stacked)
    params: dict = {}
    for path, spec in expected.items():
        arr = _load_param(path, spec, flat, per_layer, source)
        _set(params, path, jnp.asarray(np.asarray(arr).astype(np.dtype(dtype), copy=False)))
    return params
