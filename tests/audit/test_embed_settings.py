"""The encoder's settings: one default in EmbedConfig, the same for the command line and the Python API."""

from __future__ import annotations

import warnings

import pytest

from puaudit_jax.audit.config import EmbedConfig
from puaudit_jax.audit.embed import embed_comparisons, probes_encoder, table_embeddings
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.cli import build_parser
from puaudit_jax.cli.inputs import embed_config


@pytest.fixture
def tiny_as_minilm(monkeypatch, tiny_char_decoder):
    """``load_pretrained`` gives the tiny character model whatever the name (MiniLM's settings apply to it)."""
    import probes.models

    monkeypatch.setattr(probes.models, "load_pretrained", lambda name: tiny_char_decoder)
    return tiny_char_decoder


def _cli_config(tmp_path) -> EmbedConfig:
    return embed_config(build_parser().parse_args(["audit", "DATA", "--cache-dir", str(tmp_path)]))


def test_the_api_defaults_are_the_cli_defaults(tiny_as_minilm, tmp_path):
    cli = probes_encoder(config=_cli_config(tmp_path), progress=False)
    api = probes_encoder("minilm", cache_dir=tmp_path, progress=False)
    assert api.config == cli.config == EmbedConfig(encoder="minilm", cache_dir=str(tmp_path)).resolved()
    assert (api.config.encoding.max_length, api.config.encoding.long_inputs) == (256, "middle_out")
    assert api.encode_config.cache_settings() == cli.encode_config.cache_settings()


def test_the_api_with_defaults_reads_the_cache_the_cli_wrote(tiny_as_minilm, tmp_path):
    table = cone_comparisons(6, 4, d=4, seed=0).table
    first = table_embeddings(table, _cli_config(tmp_path), progress=False)  # what `puaudit audit DATA` computes
    again = embed_comparisons(table, probes_encoder("minilm", cache_dir=tmp_path, progress=False))
    assert first.encoding["cached"] == 0 and again.encoding["cached"] == again.encoding["inputs"] > 0
    assert (again.a == first.a).all() and (again.b == first.b).all()


def test_long_inputs_are_said_in_one_line_not_a_warning(tiny_as_minilm, tmp_path, capsys):
    table = cone_comparisons(6, 4, d=4, seed=0).table
    encoder = probes_encoder("minilm", no_cache=True, max_length=40, long_inputs="middle_out", progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        emb = embed_comparisons(table, encoder)
    assert not [w for w in caught if "exceed" in str(w.message)]
    lines = capsys.readouterr().err.strip().splitlines()
    over, n = emb.encoding["over_max_length"], emb.encoding["inputs"]
    assert lines == [f"[puaudit] {over} of {n} texts were longer than 40 tokens; kept their first 10 and last 30 "
                     f"tokens (middle_out, {emb.encoding['tokens_cut']:,} tokens cut); --max-length / --long-inputs "
                     "(max_length / long_inputs) choose otherwise"]  # fmt: skip
    assert over > 0


def test_unknown_settings_are_refused(tiny_as_minilm):
    with pytest.raises(TypeError, match=r"unknown settings \['pooling'\]"):
        probes_encoder("minilm", pooling="cls")


def test_the_encoding_settings_are_written_once_in_probes():
    """EmbedConfig holds probes' EncodeConfig instead of restating its fields; the keywords land there."""
    from dataclasses import fields

    from probes.encode_config import EncodeConfig
    from puaudit_jax.audit.embed import _embed_settings

    assert not {f.name for f in fields(EmbedConfig)} & {f.name for f in fields(EncodeConfig)}
    assert EmbedConfig().encoding == EncodeConfig()
    cfg = _embed_settings("smollm2", None, {"batch_size": 4, "long_inputs": "truncate", "no_cache": True})
    assert cfg.encoding == EncodeConfig(batch_size=4, long_inputs="truncate") and cfg.no_cache
    with pytest.raises(ValueError, match="one vector per input"):
        EmbedConfig(encoding=EncodeConfig(layers=(1, 2)), no_cache=True).validate()
