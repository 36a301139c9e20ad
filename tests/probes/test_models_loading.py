"""Weight loading: sharded safetensors, clear errors, GGUF conversion (permutation, cache)."""

import json
import os
import shutil

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing reaches the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from probes.models import load_pretrained  # noqa: E402
from probes.models.gguf_convert import convert_gguf, reverse_permute  # noqa: E402
from probes.models.llama import Llama  # noqa: E402

SMALL = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def _tiny_llama(vocab=97, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(**SMALL, vocab_size=vocab, attn_implementation="eager", **kw)
    return transformers.LlamaForCausalLM(cfg).eval()


def _logits(pre, ids):
    t = len(ids)
    out = pre.model.apply(pre.params, jnp.asarray([ids]), jnp.arange(t)[None], jnp.ones((1, t), bool))
    return np.asarray(pre.model.apply(pre.params, out["last"], method=Llama.lm_logits))[0]


def test_sharded_index_loads_same_params(tmp_path):
    tm = _tiny_llama()
    tm.save_pretrained(tmp_path / "one")
    tm.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    a, b = load_pretrained(tmp_path / "one"), load_pretrained(tmp_path / "sharded")
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a.params, b.params)
    assert a.tokenizer is None


def test_bf16_params(tmp_path):
    tm = _tiny_llama()
    tm.save_pretrained(tmp_path)
    pre = load_pretrained(tmp_path, dtype=jnp.bfloat16)
    assert pre.params["params"]["layers"]["self_attn"]["q_proj"]["weight"].dtype == jnp.bfloat16
    ids = [3, 9, 27, 81, 5]
    with torch.no_grad():
        ref = tm(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(_logits(pre, ids) - ref).max() < 0.05 * np.abs(ref).max()


def test_missing_folder_and_unknown_model_type(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_pretrained(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt_neox", "hidden_size": 8}))
    with pytest.raises(ValueError, match=r"config\.json.*unknown model_type 'gpt_neox'"):
        load_pretrained(tmp_path)


def test_shape_mismatch_and_missing_tensor_name_the_tensor(tmp_path):
    """Found where the weights are matched to the model: at the first use of ``params``."""
    tm = _tiny_llama()
    tm.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 80}))
    with pytest.raises(ValueError, match=r"model\.safetensors.*'layers\.mlp\.(down|gate|up)_proj\.weight'.*shape"):
        _ = load_pretrained(tmp_path).params
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from safetensors.numpy import save_file

    sd = {k: v.numpy() for k, v in tm.state_dict().items() if k != "model.norm.weight"}
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"'norm\.weight'.*missing"):
        _ = load_pretrained(tmp_path).params


def _write_gguf(path, tm, tokens, types, chat_template):
    """A float32 GGUF written the way llama.cpp's converter does (q/k rows permuted)."""
    cfg = tm.config

    def permute(w, n_head):
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(1e5)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([])
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 2)  # mislabelled like SmolLM2's: fixed from the chat template
    w.add_chat_template(chat_template)
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    layer = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for k, v in tm.state_dict().items():
        arr = v.numpy().astype(np.float32)
        if k in names:
            name = names[k]
        else:
            _, _, i, *rest = k.split(".")
            name = f"blk.{i}.{layer['.'.join(rest[:-1])]}.{rest[-1]}"
        if ".attn_q." in name:
            arr = permute(arr, cfg.num_attention_heads)
        elif ".attn_k." in name:
            arr = permute(arr, cfg.num_key_value_heads)
        w.add_tensor(name, np.ascontiguousarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_reverse_permute_inverts_llamacpp_permute():
    w = np.arange(8 * 6 * 3, dtype=np.float32).reshape(8 * 3, 6)
    perm = w.reshape(3, 2, 4, 6).swapaxes(1, 2).reshape(w.shape)
    assert not np.array_equal(perm, w)
    np.testing.assert_array_equal(reverse_permute(perm, 3), w)


def test_gguf_conversion_parity_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PUAUDIT_CACHE", str(tmp_path / "cache"))
    from probes.models.gguf_convert import _byte_level_tokenizer  # noqa: F401  (module import check)

    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    extra = [b for b in range(256) if b not in bs]
    alphabet = [chr(b) for b in bs] + [chr(256 + i) for i in range(len(extra))]
    tokens = alphabet + ["<|im_start|>", "<|im_end|>"]
    types = [1] * len(alphabet) + [3, 3]
    template = (
        "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
    )
    tm = _tiny_llama(vocab=len(tokens), seed=3, tie_word_embeddings=False, rope_theta=1e5)
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, tm, tokens, types, template)

    pre = load_pretrained(path)
    folder = pre.source
    assert folder.startswith(str(tmp_path / "cache"))
    assert pre.tokenizer.special["eos_token"] == "<|im_end|>" and pre.tokenizer.eos_token_id == len(tokens) - 1
    text = pre.tokenizer.apply_chat_template([{"role": "user", "content": "hi 42"}], add_generation_prompt=True)
    ids = pre.tokenizer.encode(text, add_special_tokens=False)
    assert ids[0] == len(tokens) - 2 and pre.tokenizer.decode(ids, skip_special_tokens=False) == text
    with torch.no_grad():
        ref = tm(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(_logits(pre, ids), ref, atol=1e-4, rtol=0)

    from pathlib import Path

    mtime = (Path(folder) / "model.safetensors").stat().st_mtime_ns
    again = load_pretrained(path)  # served from the cache, not converted again
    assert again.source == folder and (Path(folder) / "model.safetensors").stat().st_mtime_ns == mtime
    assert len(list((tmp_path / "cache" / "gguf").iterdir())) == 1

    # the key is the content: the same file elsewhere (another clone's virtualenv) reuses the folder ...
    copy = tmp_path / "elsewhere" / "tiny.gguf"
    copy.parent.mkdir()
    shutil.copyfile(path, copy)
    os.utime(copy, ns=(1, 1))
    assert convert_gguf(copy, progress=False) == Path(folder)
    # ... and a changed byte is a new conversion, never a stale hit
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    copy.write_bytes(bytes(data))
    assert convert_gguf(copy, progress=False) != Path(folder)
    assert len(list((tmp_path / "cache" / "gguf").iterdir())) == 2
