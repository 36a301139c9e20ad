"""GGUF -> Hugging Face folder (config.json, model.safetensors, tokenizer.json), converted once and cached.

The file is read and dequantised with the `gguf` package (llama.cpp's own reader); llama.cpp's
converter permutes the rows of q/k projections of `llama` checkpoints (interleaved rotary pairs),
which is undone here exactly as transformers' GGUF loader does. The converted folder lives in the
user cache (`$PUAUDIT_CACHE/gguf`, default `~/.cache/puaudit/gguf`) under a key made of the file's
content (its BLAKE2b digest: 0.1 s for SmolLM2's 98 MB) and this converter's version, so the same model
installed in many virtualenvs or clones is converted and stored once (a key of the file's path filled
the disk with one 0.5 GB folder per environment). It is written to a temporary directory and renamed
into place, so an interrupted conversion never leaves a half folder. No torch needed.

Supported: architectures llama (incl. Mistral files, which llama.cpp writes as llama), qwen2, qwen3;
byte-level BPE ("gpt2") tokenizers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from puaudit_runtime.cache import cache_dir

CONVERTER_VERSION = "1"

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_ARCHS = {
    "llama": ("llama", "LlamaForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
}


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_tensor_name(gguf_name: str) -> str:
    """`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`."""
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        base = _LAYER_NAMES.get(parts[2])
        if base is None:
            raise ValueError(f"GGUF tensor {gguf_name!r} has no known Hugging Face name")
        return f"model.layers.{parts[1]}.{base}.{'.'.join(parts[3:])}"
    base = _TOP_NAMES.get(parts[0])
    if base is None:
        raise ValueError(f"GGUF tensor {gguf_name!r} has no known Hugging Face name")
    return f"{base}.{'.'.join(parts[1:])}"


def reverse_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (n_head = heads for q, kv heads for k)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def dequantize(tensor) -> np.ndarray:
    """A GGUFReader tensor -> float32 array in PyTorch layout (rows, cols)."""
    from gguf import GGMLQuantizationType, quants

    shape = tuple(int(s) for s in reversed(tensor.shape))
    if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        arr = np.asarray(tensor.data, dtype=np.float32)
    else:
        arr = quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
    return arr.reshape(shape)


def gguf_config(reader, path: Path) -> dict:
    """HF-style config.json for the file's architecture."""
    arch = _field(reader, "general.architecture")
    if arch not in _ARCHS:
        raise ValueError(f"{path}: GGUF architecture {arch!r} is not supported ({sorted(_ARCHS)})")
    if any(t.name == "rope_freqs.weight" for t in reader.tensors):
        raise ValueError(
            f"{path}: tensor 'rope_freqs.weight' (llama3 rope scaling in GGUF) is not supported; "
            "use the original safetensors folder"
        )
    model_type, cls = _ARCHS[arch]

    def a(key, default=None):
        return _field(reader, f"{arch}.{key}", default)

    names = {t.name for t in reader.tensors}
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    hidden = int(a("embedding_length"))
    heads = int(a("attention.head_count"))
    cfg = {
        "model_type": model_type,
        "architectures": [cls],
        "vocab_size": int(embd.shape[1]),
        "hidden_size": hidden,
        "intermediate_size": int(a("feed_forward_length")),
        "num_hidden_layers": int(a("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(a("attention.head_count_kv", heads)),
        "head_dim": int(a("attention.key_length", hidden // heads)),
        "rms_norm_eps": float(a("attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(a("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(a("context_length", 4096)),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": any(n.endswith("attn_q.bias") for n in names) and model_type != "qwen2",
    }
    scaling = a("rope.scaling.type")
    if scaling == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": float(a("rope.scaling.factor"))}
    elif scaling not in (None, "none"):
        raise ValueError(f"{path}: rope scaling {scaling!r} in GGUF is not supported")
    return cfg


def _byte_level_tokenizer(reader, path: Path):
    """tokenizers.Tokenizer for a byte-level BPE vocabulary ("gpt2") stored in the GGUF."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    types = list(_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges", [])]
    # GPT-2 byte alphabet; tokens written outside it are spelled through it (as transformers does)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    spelling = dict(zip(bs, map(chr, cs)))
    alphabet = set(spelling.values())
    vocab = {}
    for i, tok in enumerate(tokens):
        key = tok if set(tok) <= alphabet else "".join(spelling[b] for b in tok.encode("utf-8"))
        vocab.setdefault(key, i)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    pre = _field(reader, "tokenizer.ggml.pre", "default")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":  # llama.cpp: digits split one by one, then the GPT-2 regex
        tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in ("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "qwen2", "deepseek-r1-qwen"):
        split = (
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        )
        if pre.startswith("qwen2") or pre == "deepseek-r1-qwen":
            split = split.replace(r"\p{N}{1,3}", r"\p{N}")
        tk.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tk.pre_tokenizer = byte_level
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, ty in zip(tokens, types)
            if ty == 3 and set(t) <= alphabet
        ]
    )
    tk.add_tokens([AddedToken(t, normalized=False, special=False) for t, ty in zip(tokens, types) if ty == 4])
    bos_id = _field(reader, "tokenizer.ggml.bos_token_id")
    if _field(reader, "tokenizer.ggml.add_bos_token", False) and bos_id is not None:
        bos = tokens[int(bos_id)]
        tk.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, int(bos_id))]
        )
    else:
        tk.post_processor = processors.ByteLevel(trim_offsets=False)
    return tk, tokens


def _special_tokens(reader, tokens: list[str], template: str | None) -> dict:
    def tok(key):
        i = _field(reader, f"tokenizer.ggml.{key}")
        return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None

    special = {
        "bos_token": tok("bos_token_id"),
        "eos_token": tok("eos_token_id"),
        "pad_token": tok("padding_token_id"),
        "unk_token": tok("unknown_token_id"),
    }
    if template and "<|im_start|>" in template and "<|im_end|>" in tokens:
        # ChatML (SmolLM2, Qwen): a turn ends with <|im_end|>; GGUF files often mislabel eos/bos.
        special["eos_token"] = "<|im_end|>"
        special["bos_token"] = "<|im_start|>" if "<|im_start|>" in tokens else special["bos_token"]
        if special["pad_token"] in (None, special["bos_token"]):
            special["pad_token"] = "<|im_end|>"
        if "<|endoftext|>" in tokens:
            special["unk_token"] = special["unk_token"] or "<|endoftext|>"
    return special


def _atomic_dir(final: Path, build) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first
            if not (final / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _content_key(path: Path) -> str:
    """16 hex digits naming a conversion: the file's bytes and :data:`CONVERTER_VERSION`, not its path."""
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "blake2b")
    digest.update(f"|converter {CONVERTER_VERSION}".encode())
    return digest.hexdigest()[:16]


def convert_gguf(path: str | Path, out_dir: Path | None = None, progress: bool = True) -> Path:
    """Convert ``path`` once into a cached HF folder and return that folder.

    Args:
        path: the GGUF file.
        out_dir: the folder to write (None: a cache folder keyed by the file's contents).
        progress: whether to show a progress bar while dequantising.

    Returns:
        The folder with ``config.json``, ``model.safetensors`` and the tokenizer files (reused when it
        already has a ``config.json``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a tokenizer other than byte-level BPE ("gpt2").
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: GGUF file not found")
    key = _content_key(path)
    final = Path(out_dir) if out_dir else cache_dir("gguf") / f"{path.stem}-{key}"
    if (final / "config.json").is_file():
        return final

    def build(tmp: Path):
        import gguf
        from safetensors.numpy import save_file
        from tqdm.auto import tqdm

        reader = gguf.GGUFReader(str(path))
        cfg = gguf_config(reader, path)
        heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        tensors = {}
        for t in tqdm(reader.tensors, desc=f"dequantising {path.name}", disable=not progress):
            name = hf_tensor_name(t.name)
            w = dequantize(t)
            if cfg["model_type"] == "llama" and w.ndim >= 1:
                if ".q_proj." in name:
                    w = reverse_permute(w, heads)
                elif ".k_proj." in name:
                    w = reverse_permute(w, kv_heads)
            tensors[name] = np.ascontiguousarray(w)
        if _field(reader, "tokenizer.ggml.model") != "gpt2":
            raise ValueError(
                f"{path}: tokenizer model {_field(reader, 'tokenizer.ggml.model')!r} is not supported "
                "(only byte-level BPE 'gpt2')"
            )
        tk, tokens = _byte_level_tokenizer(reader, path)
        template = _field(reader, "tokenizer.chat_template")
        special = _special_tokens(reader, tokens, template)
        ids = {k: (tokens.index(v) if v in tokens else None) for k, v in special.items()}
        cfg.update(bos_token_id=ids["bos_token"], eos_token_id=ids["eos_token"], pad_token_id=ids["pad_token"])
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt", "source": path.name})
        tk.save(str(tmp / "tokenizer.json"))
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(
                {**special, "chat_template": template, "model_max_length": cfg["max_position_embeddings"]}, indent=1
            )
        )
        (tmp / "config.json").write_text(json.dumps(cfg, indent=1))

    return _atomic_dir(final, build)
