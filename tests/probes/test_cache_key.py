"""The disk cache's key covers every setting that changes a row, and only those.

Keyed (a change is a cache miss): layers, pooling, max_length, long_inputs, head_fraction,
chunk_overlap, normalised, and the resolved long-input rule (cap, policy, overlap, special tokens).
Not keyed (a change keeps the hit; `EncodeConfig.ROW_NEUTRAL`): batch_size, padding_side,
micro_batch_tokens, progress and cache_every, which change nothing but float rounding or speed.
"""

from __future__ import annotations

import dataclasses
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from probes.extract import EncodeConfig, cache_namespace, encode, long_input_rule

ENCODER = SimpleNamespace(window=512, is_decoder=False)
BERT_TOKENS = SimpleNamespace(cls_token_id=101, sep_token_id=102)
ROW_CHANGES = {
    "layers": (1, 2),
    "pooling": "cls",
    "max_length": 128,
    "long_inputs": "truncate",
    "head_fraction": 0.5,
    "chunk_overlap": 8,
    "normalised": True,
}
"""A changed value of every setting that changes an output row."""
ROW_NEUTRAL = {"batch_size": 3, "padding_side": "left", "micro_batch_tokens": 64, "progress": True, "cache_every": 7}
"""A changed value of every setting that does not."""


def _namespace(config: EncodeConfig) -> str:
    return cache_namespace("fingerprint", config, long_input_rule(ENCODER, BERT_TOKENS, config))


def test_every_setting_is_either_keyed_or_declared_row_neutral():
    names = {f.name for f in dataclasses.fields(EncodeConfig)}
    assert set(ROW_CHANGES) | set(ROW_NEUTRAL) == names, "a new EncodeConfig field: is it keyed?"
    assert set(EncodeConfig.ROW_NEUTRAL) == set(ROW_NEUTRAL)
    keyed = {"normalize" if name == "normalised" else name for name in ROW_CHANGES}  # the cache's first name
    assert set(EncodeConfig().cache_settings()) == keyed


@pytest.mark.parametrize("name", sorted(ROW_CHANGES))
def test_a_setting_that_changes_rows_changes_the_key(name):
    changed = EncodeConfig(**{name: ROW_CHANGES[name]})
    assert getattr(changed, name) != getattr(EncodeConfig(), name)
    assert _namespace(changed) != _namespace(EncodeConfig())


@pytest.mark.parametrize("name", sorted(ROW_NEUTRAL))
def test_a_setting_that_changes_no_row_keeps_the_key(name):
    assert _namespace(EncodeConfig(**{name: ROW_NEUTRAL[name]})) == _namespace(EncodeConfig())


def test_the_resolved_rule_is_keyed():
    """A default filled in by the rule (the cap, the overlap, the special tokens) changes the key with it."""
    config = EncodeConfig()
    rule = long_input_rule(ENCODER, BERT_TOKENS, config)
    key = cache_namespace("fingerprint", config, rule)
    for change in (dict(cap=256), dict(overlap=rule.overlap + 1), dict(lead=()), dict(trail=(7,)),
                   dict(policy="middle_out"), dict(head_fraction=0.3)):  # fmt: skip
        assert cache_namespace("fingerprint", config, dataclasses.replace(rule, **change)) != key, change
    assert cache_namespace("another model", config, rule) != key


def test_encoding_through_the_cache_hits_and_misses_as_keyed(tiny_char_decoder, tmp_path):
    texts = [f"text {k} " + "y" * k for k in range(6)]
    base = EncodeConfig(batch_size=2)
    fresh, report = encode(tiny_char_decoder, texts, base, cache_dir=tmp_path)
    assert report.n_cached == 0
    same, report = encode(tiny_char_decoder, texts, EncodeConfig(batch_size=4, padding_side="left"), cache_dir=tmp_path)
    assert report.n_cached == len(texts)
    np.testing.assert_array_equal(same, fresh)  # served from the cache
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inputs cut by the small cap: not what this test is about
        for config in (EncodeConfig(batch_size=2, layers=1), EncodeConfig(batch_size=2, max_length=8)):
            other, report = encode(tiny_char_decoder, texts, config, cache_dir=tmp_path)
            assert report.n_cached == 0
            assert np.abs(other - fresh).max() > 1e-3  # the rows do differ: a hit would have been stale
