"""Model configurations: frozen dataclasses parsed from a Hugging Face `config.json`.

Two families are supported:

* `EncoderConfig` -- BERT-family encoders (BertModel: MiniLM, BGE, ...): absolute positions,
  token types, post-LayerNorm, GELU.
* `DecoderConfig` -- the Llama family (Llama 1-3 incl. Llama-3 rope scaling, Mistral, Qwen2 with
  q/k/v bias, Qwen3 with q/k RMSNorm), grouped-query attention, tied or untied LM head, or the
  sequence-classification head of reward models (`*ForSequenceClassification`).

`config_from_hf(d, source)` turns a parsed `config.json` into one of them and raises a
`ValueError` naming `source` for an unknown `model_type` or missing fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DECODER_TYPES = ("llama", "mistral", "qwen2", "qwen3")
ENCODER_TYPES = ("bert",)


@dataclass(frozen=True)
class RopeConfig:
    """Rotary position embedding. `rope_type` is one of "default", "linear", "llama3"."""

    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class EncoderConfig:
    """BERT-family encoder. `pooling` is the model's own sentence pooling ("mean" or "cls")."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    pooling: str = "cls"
    model_type: str = "bert"
    attention: str = "auto"  # layers.ATTENTION_KINDS: "blocked" on the CPU, "fused" elsewhere

    @property
    def is_decoder(self) -> bool:
        """False: an encoder."""
        return False

    @property
    def head_dim(self) -> int:
        """Width of one attention head (hidden_size // num_heads)."""
        return self.hidden_size // self.num_heads

    @property
    def window(self) -> int:
        """Longest sequence (tokens, incl. special tokens) the model can read."""
        return self.max_position_embeddings


@dataclass(frozen=True)
class DecoderConfig:
    """Llama-family decoder.

    head: "lm" (next-token logits; tied to the input embeddings when `tie_word_embeddings`)
    or "score" (sequence classification: `num_labels` scores of the last non-pad token).
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float = 1e-6
    rope: RopeConfig = RopeConfig()
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    sliding_window: int | None = None
    hidden_act: str = "silu"
    head: str = "lm"
    num_labels: int = 1
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    attention: str = "auto"  # layers.ATTENTION_KINDS: "blocked" on the CPU, "fused" elsewhere
    eos_token_ids: tuple[int, ...] = ()
    model_type: str = "llama"

    @property
    def is_decoder(self) -> bool:
        """True: a decoder."""
        return True

    @property
    def window(self) -> int:
        """Longest sequence (tokens, incl. special tokens) the model can read."""
        return self.max_position_embeddings

    def __post_init__(self):
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads={self.num_heads} is not a multiple of num_key_value_heads={self.num_kv_heads}"
            )


ModelConfig = EncoderConfig | DecoderConfig


def _need(d: dict, key: str, source: str) -> Any:
    if key not in d or d[key] is None:
        raise ValueError(f"{source}: config field {key!r} is missing")
    return d[key]


def _rope_from_hf(d: dict, source: str) -> RopeConfig:
    # transformers 5 writes `rope_parameters` (incl. rope_theta); older files `rope_scaling` + `rope_theta`.
    params = dict(d.get("rope_scaling") or {})
    params.update(d.get("rope_parameters") or {})
    theta = float(params.get("rope_theta", d.get("rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default")) or "default"
    if rope_type not in ("default", "linear", "llama3"):
        raise ValueError(f"{source}: rope type {rope_type!r} is not supported (default, linear, llama3)")
    return RopeConfig(
        theta=theta,
        rope_type=rope_type,
        factor=float(params.get("factor", 1.0) or 1.0),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(
            params.get("original_max_position_embeddings", d.get("max_position_embeddings", 8192))
        ),
    )


def _eos_tuple(v) -> tuple[int, ...]:
    if v is None:
        return ()
    return tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else (int(v),)


def _encoder_config_from_hf(d: dict, source: str, pooling: str | None) -> EncoderConfig:
    """An `EncoderConfig` from a BERT-family HF config dict (`model_type` in ENCODER_TYPES)."""
    model_type = d.get("model_type")
    if d.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{source}: position_embedding_type {d['position_embedding_type']!r} unsupported")
    return EncoderConfig(
        vocab_size=int(_need(d, "vocab_size", source)),
        hidden_size=int(_need(d, "hidden_size", source)),
        num_layers=int(_need(d, "num_hidden_layers", source)),
        num_heads=int(_need(d, "num_attention_heads", source)),
        intermediate_size=int(_need(d, "intermediate_size", source)),
        max_position_embeddings=int(d.get("max_position_embeddings", 512)),
        type_vocab_size=int(d.get("type_vocab_size", 2)),
        layer_norm_eps=float(d.get("layer_norm_eps", 1e-12)),
        hidden_act=str(d.get("hidden_act", "gelu")),
        pad_token_id=int(d.get("pad_token_id") or 0),
        pooling=pooling or "cls",
        model_type=model_type,
    )


def _decoder_config_from_hf(d: dict, source: str) -> DecoderConfig:
    """A `DecoderConfig` from a Llama/Qwen-family HF config dict (`model_type` in DECODER_TYPES).

    It reads the head ("lm" or "score"), grouped-query heads, biases, sliding window and eos ids.
    """
    model_type = d.get("model_type")
    archs = d.get("architectures") or []
    head = "score" if any(a.endswith("ForSequenceClassification") for a in archs) else "lm"
    hidden = int(_need(d, "hidden_size", source))
    heads = int(_need(d, "num_attention_heads", source))
    attention_bias = bool(d.get("attention_bias", False))
    sliding = d.get("sliding_window")
    if model_type in ("qwen2", "qwen3") and not d.get("use_sliding_window", False):
        sliding = None
    if model_type == "llama":
        sliding = None
    num_labels = d.get("num_labels")
    if num_labels is None:
        num_labels = len(d["id2label"]) if d.get("id2label") else 1
    return DecoderConfig(
        vocab_size=int(_need(d, "vocab_size", source)),
        hidden_size=hidden,
        num_layers=int(_need(d, "num_hidden_layers", source)),
        num_heads=heads,
        num_kv_heads=int(d.get("num_key_value_heads") or heads),
        head_dim=int(d.get("head_dim") or hidden // heads),
        intermediate_size=int(_need(d, "intermediate_size", source)),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        rope=_rope_from_hf(d, source),
        max_position_embeddings=int(d.get("max_position_embeddings", 4096)),
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)) and head == "lm",
        qkv_bias=True if model_type == "qwen2" else attention_bias,
        o_bias=attention_bias if model_type in ("llama", "qwen3") else False,
        mlp_bias=bool(d.get("mlp_bias", False)),
        qk_norm=model_type == "qwen3",
        sliding_window=int(sliding) if sliding else None,
        hidden_act=str(d.get("hidden_act", "silu")),
        head=head,
        num_labels=int(num_labels),
        pad_token_id=d.get("pad_token_id"),
        bos_token_id=d.get("bos_token_id"),
        eos_token_ids=_eos_tuple(d.get("eos_token_id")),
        model_type=model_type,
    )


def config_from_hf(d: dict, source: str = "config.json", pooling: str | None = None) -> ModelConfig:
    """Parse a Hugging Face config dict into an encoder or decoder config (by its ``model_type``).

    Args:
        d: the parsed ``config.json``.
        source: names the file in error messages.
        pooling: an encoder's sentence pooling ("mean" or "cls"; None: "cls"); unused for a decoder.

    Returns:
        The :class:`EncoderConfig` or :class:`DecoderConfig`.

    Raises:
        ValueError: an unsupported ``model_type`` (the supported ones named).
    """
    model_type = d.get("model_type")
    if model_type in ENCODER_TYPES:
        return _encoder_config_from_hf(d, source, pooling)
    if model_type in DECODER_TYPES:
        return _decoder_config_from_hf(d, source)
    raise ValueError(f"{source}: unknown model_type {model_type!r}; supported: {ENCODER_TYPES + DECODER_TYPES}")


def read_config(folder: str | Path) -> ModelConfig:
    """Read `config.json` (and the sentence-transformers pooling config when present) from `folder`."""
    folder = Path(folder)
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: config.json not found")
    d = json.loads(path.read_text())
    pooling = None
    pool_path = folder / "1_Pooling" / "config.json"
    if pool_path.is_file():
        p = json.loads(pool_path.read_text())
        if p.get("pooling_mode_mean_tokens"):
            pooling = "mean"
        elif p.get("pooling_mode_cls_token"):
            pooling = "cls"
    return config_from_hf(d, str(path), pooling=pooling)


def config_to_dict(cfg: ModelConfig) -> dict:
    """A JSON-able dict (used for fingerprints of cached embeddings)."""
    return {"class": type(cfg).__name__, **dataclasses.asdict(cfg)}
