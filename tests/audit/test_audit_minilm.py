"""The encoder step with real texts: inputs of MT-Bench turn 2, and (slow) the real bundled MiniLM port."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit_jax.audit import audit
from puaudit_jax.audit.embed import embed_comparisons, pair_inputs, probes_encoder
from puaudit_jax.evaluate import split_labels


def small_mtbench(table):
    """MT-Bench (the ``mtbench`` fixture) cut to its math and reasoning questions, turn 1."""
    return table[table.question_type.isin(["math", "reasoning"]) & (table.turn == 1)].reset_index(drop=True)


@pytest.mark.slow
def test_minilm_audit_on_a_small_mtbench_slice(tmp_path, mtbench):
    table = small_mtbench(mtbench)
    # the demo's settings: MiniLM's 256-token input, the middle of long inputs cut
    encoder = probes_encoder("minilm", cache_dir=tmp_path, progress=False, max_length=256, long_inputs="middle_out")
    emb = embed_comparisons(table, encoder, source="minilm")
    assert emb.dim == 384 and np.isfinite(emb.a).all()
    # the second call is served from the content-hash cache and gives the same vectors
    again = embed_comparisons(table, encoder, source="minilm")
    np.testing.assert_allclose(again.a, emb.a, atol=1e-6)
    split = split_labels(table, p_ratio=0.5, seed=0)
    res = audit(split.table, emb, scorer="pot", rule="paper")
    assert res.report.counts.U == len(split.eval_ids)
    assert res.pool["score"].between(0, 1).all()
    default = audit(split.table, emb)  # kNN scores, the evidence rule (style is the only evidence here)
    assert default.report.decision.rule == "evidence"
    assert default.pool["p_wrong"].between(0, 1).all()


def test_turn2_inputs_carry_each_sides_own_history(mtbench):
    row = mtbench[mtbench.turn == 2].iloc[:1]
    ids, xa, xb = pair_inputs(row)
    r = row.iloc[0]
    assert xa[0] == (
        "<|user|>"
        + r.question[0]
        + "<|assistant|>"
        + r.history_a[0]
        + "<|user|>"
        + r.question[1]
        + "<|assistant|>"
        + r.response_a
    )
    assert xb[0].endswith(r.response_b) and r.history_b[0] in xb[0]


@pytest.mark.slow
def test_minilm_chunked_inputs_served_from_cache(tmp_path, mtbench):
    # Regression: with every input already cached, the chunk policy used to build a float
    # index array from an empty list and np.add.at raised IndexError.
    table = small_mtbench(mtbench)
    encoder = probes_encoder("minilm", cache_dir=tmp_path, progress=False, long_inputs="chunk")
    first = embed_comparisons(table, encoder)
    again = embed_comparisons(table, encoder)
    np.testing.assert_allclose(again.a, first.a, atol=1e-6)
