"""The long-input seams of probes.extract without a model: the rule, `plan_pieces` and `pool_pieces`."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from probes.extract import (
    DECODER_MAX_LENGTH,
    EncodeConfig,
    LongInputRule,
    Pieces,
    long_input_rule,
    plan_pieces,
    pool_pieces,
)

ENCODER = SimpleNamespace(window=512, is_decoder=False)
DECODER = SimpleNamespace(window=8192, is_decoder=True)
BERT_TOKENS = SimpleNamespace(cls_token_id=101, sep_token_id=102)


def _wrapped(body: list[int]) -> list[int]:
    return [101, *body, 102]


def test_the_rule_fills_the_defaults_of_the_model():
    enc = long_input_rule(ENCODER, BERT_TOKENS, EncodeConfig())
    assert enc == LongInputRule(
        cap=512, policy="chunk", head_fraction=0.25, overlap=510 // 4, lead=(101,), trail=(102,)
    )
    dec = long_input_rule(DECODER, None, EncodeConfig())
    assert (dec.cap, dec.policy, dec.lead, dec.trail) == (DECODER_MAX_LENGTH, "middle_out", (), ())
    given = long_input_rule(ENCODER, None, EncodeConfig(max_length=64, long_inputs="truncate", chunk_overlap=3))
    assert (given.cap, given.policy, given.overlap) == (64, "truncate", 3)


@pytest.mark.parametrize(
    "model,config,message",
    [
        (ENCODER, EncodeConfig(max_length=513), "exceeds the model window 512"),
        (DECODER, EncodeConfig(long_inputs="chunk"), "chunked encoding is for encoders"),
    ],
)
def test_the_rule_refuses_what_the_model_cannot_do(model, config, message):
    with pytest.raises(ValueError, match=message):
        long_input_rule(model, None, config)


@pytest.mark.parametrize("policy", ["chunk", "middle_out", "truncate", "error"])
def test_inputs_within_the_cap_are_one_piece_each_as_they_are(policy):
    seqs = [[5, 6, 7], [8], [], list(range(10, 18))]
    pieces = plan_pieces(seqs, LongInputRule(cap=8, policy=policy, lead=(101,), trail=(102,)))
    assert pieces.as_lists() == seqs
    assert pieces.owner.tolist() == [0, 1, 2, 3] and pieces.offsets.tolist() == [0, 3, 4, 4, 12]
    assert pieces.lengths.tolist() == [3, 1, 0, 8] and pieces.n_inputs == 4


def test_truncate_keeps_the_beginning_and_middle_out_the_head_and_the_end():
    seqs = [list(range(100, 120)), [1, 2, 3]]
    truncated = plan_pieces(seqs, LongInputRule(cap=8, policy="truncate"))
    assert truncated.as_lists() == [list(range(100, 108)), [1, 2, 3]]
    middle = plan_pieces(seqs, LongInputRule(cap=8, policy="middle_out", head_fraction=0.25))
    assert middle.as_lists() == [[100, 101, *range(114, 120)], [1, 2, 3]]  # int(8 * 0.25) = 2 first, 6 last
    assert middle.piece_lengths().tolist() == [8, 3] and middle.owner.tolist() == [0, 1]


def test_chunk_cuts_overlapping_windows_rewrapped_in_the_special_tokens():
    body = list(range(1000, 1014))  # 14 tokens; windows of 8 - 2 = 6 with overlap 2: starts 0, 4, 8 (= 14 - 6)
    seqs = [[7, 8], _wrapped(body), _wrapped([9])]
    pieces = plan_pieces(seqs, LongInputRule(cap=8, policy="chunk", overlap=2, lead=(101,), trail=(102,)))
    assert pieces.as_lists() == [[7, 8], _wrapped(body[0:6]), _wrapped(body[4:10]), _wrapped(body[8:14]),
                                 _wrapped([9])]  # fmt: skip
    assert pieces.owner.tolist() == [0, 1, 1, 1, 2]
    assert pieces.lengths.tolist() == [2, 16, 3] and pieces.piece_lengths().max() <= pieces.cap


def test_error_names_the_inputs_over_the_cap():
    with pytest.raises(ValueError, match=r"2 inputs exceed 4 tokens \(first indices \[1, 3\]\)"):
        plan_pieces([[1], [1] * 5, [2] * 4, [3] * 9], LongInputRule(cap=4, policy="error"))


def test_no_inputs_no_pieces():
    pieces = plan_pieces([], LongInputRule(cap=4, policy="chunk"))
    assert pieces.ids.shape == (0,) and pieces.offsets.tolist() == [0] and pieces.owner.shape == (0,)
    assert pool_pieces(np.zeros((0, 2, 3), np.float32), pieces).shape == (0, 2, 3)


def test_chunk_rows_are_the_mean_of_their_windows():
    seqs = [[1, 2], list(range(10, 22)), [3, 4, 5]]  # the middle one: two windows of 6
    pieces = plan_pieces(seqs, LongInputRule(cap=6, policy="chunk", overlap=0))
    assert pieces.owner.tolist() == [0, 1, 1, 2] and pieces.piece_lengths().tolist() == [2, 6, 6, 3]
    states = np.random.default_rng(0).normal(size=(4, 2, 3)).astype(np.float32)  # (k pieces, L layers, D)
    rows = pool_pieces(states, pieces)
    assert rows.shape == (3, 2, 3) and rows.dtype == np.float32
    np.testing.assert_allclose(rows[1], (states[1] + states[2]) / 2, rtol=1e-6)
    np.testing.assert_allclose(rows[[0, 2]], states[[0, 3]], rtol=1e-6)


def test_pieces_are_weighted_by_their_token_counts():
    pieces = Pieces(ids=np.arange(11), offsets=np.asarray([0, 2, 8, 11]), owner=np.asarray([0, 0, 1]),
                    lengths=np.asarray([20, 3]), cap=6, policy="chunk")  # fmt: skip
    states = np.asarray([[[1.0]], [[5.0]], [[7.0]]], np.float32)  # (3 pieces, 1 layer, D = 1)
    assert pool_pieces(states, pieces)[:, 0, 0].tolist() == [(2 * 1.0 + 6 * 5.0) / 8, 7.0]


def test_pieces_that_do_not_add_up_are_refused():
    with pytest.raises(ValueError, match="do not cut 11 ids into 3 pieces"):
        Pieces(ids=np.arange(11), offsets=np.asarray([0, 2, 8]), owner=np.asarray([0, 0, 1]),
               lengths=np.asarray([20, 3]), cap=6, policy="chunk")  # fmt: skip
    with pytest.raises(ValueError, match="owner indices outside"):
        Pieces(ids=np.arange(3), offsets=np.asarray([0, 3]), owner=np.asarray([2]),
               lengths=np.asarray([3]), cap=6, policy="chunk")  # fmt: skip


def test_the_cut_policies_keep_the_piece_states_as_rows():
    pieces = plan_pieces([[1] * 9, [2]], LongInputRule(cap=4, policy="middle_out"))
    states = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    assert pool_pieces(states, pieces) is states
    with pytest.raises(ValueError, match="3 state rows for 2 pieces"):
        pool_pieces(np.zeros((3, 2, 3), np.float32), pieces)
