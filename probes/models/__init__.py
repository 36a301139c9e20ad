"""Flax (linen) ports of BERT-family encoders and Llama-family decoders, and local weight loading.

from probes.models import load_pretrained
pre = load_pretrained("minilm")        # or "smollm2", a HF folder, a .gguf file
out = pre.model.apply(pre.params, ids, valid)          # Bert
out = pre.model.apply(pre.params, ids, positions, valid)  # Llama
"""

from .config import DecoderConfig, EncoderConfig, RopeConfig, config_from_hf, read_config
from .gguf_convert import convert_gguf
from .pretrained import BUNDLED, Pretrained, build_model, load_pretrained, resolve
from .tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "BUNDLED",
    "DecoderConfig",
    "EncoderConfig",
    "Pretrained",
    "RopeConfig",
    "Tokenizer",
    "build_model",
    "config_from_hf",
    "convert_gguf",
    "load_pretrained",
    "load_tokenizer",
    "read_config",
    "resolve",
]
