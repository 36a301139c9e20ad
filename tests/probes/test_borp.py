"""probes.borp on synthetic data and a tiny random Llama (fast); SmolLM2 checks are marked slow."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from probes import borp
from probes.extract import encode_ids
from tests.helpers import CharTokenizer, ChatMLTokenizer

# fixture tiny_char_decoder (tests/conftest.py): a 3-layer random Llama (d = 32, vocab 101) with the
# character tokenizer (tests.helpers.make_tiny_char_decoder)


def _dialogues(n, rng):
    """Random character dialogues of one length (one shape bucket: few compilations)."""
    letters = np.array(list("abcdefghij "))
    return [
        [
            {"role": "user", "content": "".join(rng.choice(letters, 20))},
            {"role": "assistant", "content": "".join(rng.choice(letters, 16))},
        ]
        for _ in range(n)
    ]


SHORT = [borp.ProbePrompt("a", "rate it", "good", "bad"), borp.ProbePrompt("b", "is it on topic?", "yes", "no")]


# ---------------------------------------------------------------------------------------------
# prompts and extraction


def test_prompts_and_rendering():
    blind = borp.blind_probe()
    assert (blind.positive, blind.negative) == ("Performance is Excellent", "Performance is Terrible")
    rub = borp.rubric_probe("engagingness", {1: "dull", 3: "lively"}, scale=(1, 3))
    assert rub.scale == (1.0, 3.0) and rub.instruction.index("3: lively") < rub.instruction.index("1: dull")
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    tok = ChatMLTokenizer()
    prefix = borp.render_prefix(tok, msgs)
    suffix = borp.render_suffix(tok, msgs, rub.instruction, rub.positive)
    full = tok.apply_chat_template(msgs + [{"role": "user", "content": rub.instruction}], add_generation_prompt=True)
    assert prefix + suffix == full + "Performance is Excellent"
    assert borp.render_suffix(CharTokenizer(), msgs, "x", "y") == "<|user|>x<|assistant|>y"


def test_contrastive_vectors_reuse_equals_recompute(tiny_char_decoder):
    rng = np.random.default_rng(0)
    dialogues = _dialogues(3, rng)
    probes = SHORT
    V, st = borp.contrastive_vectors(tiny_char_decoder, dialogues, probes, layers=[1, -1])
    W, st2 = borp.contrastive_vectors(tiny_char_decoder, dialogues, probes, layers=[1, -1], reuse_prefix=False)
    assert V.shape == (3, 2, 2, 32)
    np.testing.assert_allclose(V, W, atol=2e-5)
    assert st.computed_tokens < st2.computed_tokens and st.prefix_tokens == st2.prefix_tokens
    assert st.n_items == 3 and st.sessions_per_hour > 0
    # v really is h(prefix + positive) - h(prefix + negative) at the last token
    tok = tiny_char_decoder.tokenizer
    p = tok.encode(borp.render_prefix(tok, dialogues[1]))
    pos = tok.encode(borp.render_suffix(tok, dialogues[1], probes[1].instruction, probes[1].positive), False)
    neg = tok.encode(borp.render_suffix(tok, dialogues[1], probes[1].instruction, probes[1].negative), False)
    h, _ = encode_ids(tiny_char_decoder, [p + pos, p + neg])
    np.testing.assert_allclose(V[1, 1, 1], h[0] - h[1], atol=2e-5)
    assert np.abs(V[1, 1, 1]).max() > 1e-3
    single, st1 = borp.contrastive_vectors(tiny_char_decoder, dialogues[:1], probes[:1], layers=-1)
    assert single.shape == (1, 1, 32) and st1.n_items == 1 and st1.n_suffixes == 2
    np.testing.assert_allclose(single[0, 0], V[0, 0, 1], atol=2e-5)  # layers=-1 is the final layer


def test_compress_middle_out():
    msgs = [{"role": "system", "content": "k " * 10}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i} " * 5} for i in range(8)
    ]
    out, dropped = borp.compress_middle_out(msgs, max_tokens=30)
    assert out[0]["role"] == "system" and out[1]["content"].startswith("t0") and out[-1]["content"].startswith("t7")
    assert dropped == 4 and sum(len(m["content"].split()) for m in out) <= 30
    assert [m["content"][:2] for m in out[2:]] == ["t5", "t6", "t7"]  # the most recent turns survive
    same, none = borp.compress_middle_out(msgs, max_tokens=1000)
    assert same == msgs and none == 0


# ---------------------------------------------------------------------------------------------
# geometry, resampling, heads (synthetic)


def _synthetic(n=600, d=40, seed=0, skew=True):
    """Scores 1..5 skewed to the middle; v = 5 e1 + 2 (s - 3) e1 + noise: ||v|| grows with s and the
    distance to the centroid is U-shaped in s (the paper's Figure 2 geometry)."""
    rng = np.random.default_rng(seed)
    p = np.array([0.07, 0.18, 0.5, 0.18, 0.07]) if skew else np.full(5, 0.2)
    s = rng.choice(np.arange(1, 6), n, p=p).astype(float)
    e1 = np.zeros(d)
    e1[0] = 1
    V = (5 + 2 * (s - 3))[:, None] * e1 + 0.6 * rng.normal(size=(n, d))
    return V, s


def test_polarization_index_pushes_extremes_to_tails():
    V, s = _synthetic()
    pi = borp.polarization_index(V)
    assert spearmanr(pi, s).statistic > 0.7
    top, bottom = borp.mine_polarized(pi, 30)
    assert len(top) == len(bottom) == 30 and pi[top].min() >= pi[bottom].max()
    assert np.mean(s[top] == 5) > 0.8 and np.mean(s[bottom] == 1) > 0.8
    # extremes are over-represented in the 10 % tails, relative to their base rate
    q = np.quantile(pi, [0.1, 0.9])
    tails = (pi <= q[0]) | (pi >= q[1])
    extreme = (s == 1) | (s == 5)
    assert extreme[tails].mean() > 4 * extreme.mean()
    # outlierness alone is U-shaped (large for both extremes)
    D = borp.outlierness(V, V.mean(0))
    assert D[s == 1].mean() > D[s == 3].mean() and D[s == 5].mean() > D[s == 3].mean()
    # the reference set fixes the scale: scoring a subset with the full set as reference
    np.testing.assert_allclose(borp.polarization_index(V[:50], reference=V), pi[:50])
    np.testing.assert_allclose(borp.polarization_index(V, orientation=-1), -pi)


def test_density_resample_flattens_the_distribution():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, 900), rng.uniform(3, 6, 100)])
    plain = borp.density_resample(x, np.random.default_rng(1), power=0.0)
    flat = borp.density_resample(x, np.random.default_rng(1), power=1.0, max_ratio=100)
    assert len(flat) == len(x)
    tail = lambda idx: np.mean(x[idx] > 3)  # noqa: E731
    assert abs(tail(plain) - 0.1) < 0.04 and tail(flat) > 0.3
    again = borp.density_resample(x, np.random.default_rng(1), power=1.0, max_ratio=100)
    np.testing.assert_array_equal(flat, again)  # seeded


def test_heads_predict_on_scale_and_pls_beats_pca_on_topic_noise():
    rng = np.random.default_rng(2)
    s = rng.choice(np.arange(1, 6), 300).astype(float)
    u = rng.normal(size=60) / np.sqrt(60)
    topics = rng.normal(size=(300, 4)) * [12, 10, 9, 8] @ rng.normal(size=(4, 60)) / np.sqrt(60)
    V = np.outer(s, u) + topics + 0.1 * rng.normal(size=(300, 60))  # high-variance "topic residuals"
    folds = borp.grouped_kfold(np.arange(300) // 3, 5)
    res = {}
    for reducer in ("pls", "pca"):
        cfg = borp.HeadConfig(n_components=2, reducer=reducer, resample=None)
        pred = borp.cross_val_predict(lambda cfg=cfg: borp.BorpHead(cfg), V, s, folds)
        assert pred.min() >= 1 and pred.max() <= 5
        res[reducer] = borp.agreement(s, pred)
    print({k: round(v["pearson"], 3) for k, v in res.items()})
    assert res["pls"]["pearson"] > 0.6 and res["pls"]["pearson"] > res["pca"]["pearson"] + 0.3
    geo = borp.BorpHead(borp.HeadConfig(n_components=3, resample="geometric", n_resamples=3)).fit(V, s)
    assert len(geo.models_) == 3 and geo.predict(V[:5]).shape == (5,)
    assert borp.BorpHead(borp.HeadConfig(resample="label")).fit(V, s).predict(V).shape == (300,)
    with pytest.raises(ValueError, match="reducer"):
        borp.BorpHead(borp.HeadConfig(reducer="svm")).fit(V, s)


def test_layerwise_uncertainty_tracks_error():
    rng = np.random.default_rng(3)
    n, d = 400, 30
    s = rng.uniform(1, 5, n)
    hard = rng.uniform(0, 1, n) ** 2  # per-item difficulty
    signal = np.outer(s, rng.normal(size=d))
    V = np.stack(
        [
            signal + (0.5 + 6 * hard)[:, None] * rng.normal(size=(n, d)),
            signal + (0.5 + 6 * hard)[:, None] * rng.normal(size=(n, d)),
        ],
        axis=1,
    )
    folds = borp.grouped_kfold(np.arange(n), 4)
    cfg = borp.HeadConfig(n_components=3, resample=None)
    out = borp.cross_val_predict(lambda: borp.LayerwiseHeads(cfg, mid=0, final=1), V, s, folds)
    assert out.shape == (n, 3)
    err = np.abs(out[:, 0] - s)
    assert spearmanr(out[:, 2], err).statistic > 0.3


def test_grouped_kfold_and_agreement():
    groups = np.repeat(np.arange(20), 6)
    folds = borp.grouped_kfold(groups, 5, seed=1)
    seen = np.concatenate([te for _, te in folds])
    assert sorted(seen.tolist()) == list(range(120))
    for tr, te in folds:
        assert not set(groups[tr]) & set(groups[te])
    a = borp.agreement([1, 2, 3, 4, 5.0], [1.2, 2.1, 2.7, 4.4, 4.9])
    assert 0.9 < a["k_alpha"] <= 1 and a["pearson_low"] < a["pearson"] < a["pearson_high"] and a["n"] == 5


def test_bootstrap_rubric_with_a_fake_teacher():
    calls = []

    def teacher(prompt):
        calls.append(prompt)
        if "draft rubrics" in prompt:
            return "5: praises the answer (Signal features: thanks)\n3: neutral\n1: insults (Signal features: sarcasm)"
        return f"draft {len(calls)}"

    high = [f"HIGH-{i}" for i in range(9)]
    low = [f"LOW-{i}" for i in range(9)]
    out = borp.bootstrap_rubric(teacher, high, low, criterion="user acceptance", n_drafts=3, cases_per_draft=3)
    assert len(calls) == 4 and out.drafts == ("draft 1", "draft 2", "draft 3")
    for case in high + low:  # disjoint subsets: every case in exactly one draft prompt
        assert sum(case in p for p in calls[:3]) == 1
    assert all(d in calls[3] for d in out.drafts) and "1-5 scale" in calls[3]
    assert out.rubric[5].startswith("praises") and out.rubric[1].startswith("insults") and out.rubric[4] == ""
    assert borp.parse_rubric("Score 4 - good\n**2**: meh", [4, 3, 2]) == {4: "good", 3: "", 2: "meh"}


def test_end_to_end_tiny_model(tiny_char_decoder):
    rng = np.random.default_rng(5)
    dialogues = _dialogues(12, rng)
    V = borp.contrastive_vectors(tiny_char_decoder, dialogues, SHORT[:1], layers=[1, -1])[0][:, 0]  # (12, 2, 32)
    y = rng.integers(1, 6, 12).astype(float)
    folds = borp.grouped_kfold(np.arange(12), 3)
    out = borp.cross_val_predict(lambda: borp.LayerwiseHeads(borp.HeadConfig(n_components=2), 0, 1), V, y, folds)
    assert out.shape == (12, 3) and np.isfinite(out).all()


# ---------------------------------------------------------------------------------------------
# the real SmolLM2 (slow)


@pytest.mark.slow
def test_smollm2_reuse_equals_recompute_and_chat_template(smollm2):
    pre = smollm2
    dialogues = [
        [
            {"role": "user", "content": "do you like jazz?"},
            {"role": "assistant", "content": "i love it, especially miles davis."},
        ],
        [{"role": "user", "content": "what is the capital of france?"}, {"role": "assistant", "content": "bananas."}],
    ]
    probes = [borp.blind_probe(), borp.rubric_probe("coherence", {3: "on topic", 1: "off topic"}, (1, 3))]
    V, _ = borp.contrastive_vectors(pre, dialogues, probes, layers=[15, -1])
    W, _ = borp.contrastive_vectors(pre, dialogues, probes, layers=[15, -1], reuse_prefix=False)
    assert V.shape == (2, 2, 2, pre.config.hidden_size)
    np.testing.assert_allclose(V, W, atol=2e-3, rtol=1e-3)
    suffix = borp.render_suffix(pre.tokenizer, dialogues[0], probes[0].instruction, probes[0].positive)
    assert suffix.startswith("<|im_start|>user") and suffix.endswith("Performance is Excellent")
