"""Bad files, options and folders end in one `error: ...` naming what is wrong, exit status 2, no
traceback; `--debug` shows the traceback; option checks come before any expensive step."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from puaudit_jax.cli import CommandError, main
from puaudit_jax.datasets import load_comparisons

ROW = {"id": "1", "question": "q", "response_a": "a", "response_b": "b", "judge": "A", "human": "B"}


def _fail(argv, capsys) -> str:
    with pytest.raises(CommandError) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.fixture
def files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "latin1.jsonl").write_bytes(json.dumps(ROW).encode() + b"\n" + b'{"id": "caf\xe9"}\n')
    (tmp_path / "folder.jsonl").mkdir()
    (tmp_path / "nosuffix").write_text(json.dumps(ROW))
    (tmp_path / "dup.csv").write_text("id,judge,judge,question,response_a,response_b\n1,A,B,q,a,b\n")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 truncated zip")
    return tmp_path


@pytest.mark.parametrize(
    "name, extra, expected",
    [
        ("empty.jsonl", [], "empty.jsonl: no comparisons"),
        ("latin1.jsonl", [], "latin1.jsonl: line 2: not UTF-8"),
        ("folder.jsonl", [], "folder.jsonl is a folder"),
        ("nosuffix", [], "nosuffix: cannot tell the format"),
        ("dup.csv", [], "dup.csv: line 1: column(s) ['judge'] appear more than once"),
        ("data", ["--embeddings", "{root}/bad.npz"], "bad.npz: not a readable embeddings .npz"),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_file(files, capsys, name, extra, expected):
    data = str(files / name) if name != "data" else str(files / "ok.jsonl")
    if name == "data":
        (files / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    argv = ["audit", data, "--out", str(files / "out"), "--quiet", *[e.format(root=files) for e in extra]]
    assert expected in _fail(argv, capsys)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["audit", "mtbench", "--batch-size", "-3"], "batch_size must be an integer >= 1"),
        (["audit", "mtbench", "--batch-size", "0"], "batch_size must be an integer >= 1"),
        (["audit", "mtbench", "--max-length", "0"], "max_length must be an integer >= 1"),
        (["audit", "mtbench", "--eta", "2"], "eta must be in [0, 1]"),
        (["audit", "mtbench", "--folds", "1"], "folds must be >= 2"),
        (["evaluate", "mtbench", "--seeds", "0"], "seeds must be >= 1"),
        (["evaluate", "mtbench", "--p-ratio", "1.5"], "p_ratio must be in (0, 1)"),
        (["evaluate", "mtbench", "--sweep", "eta=0.1"], "--sweep needs p_ratio="),
        (["evaluate", "mtbench", "--pairs", "knn:magic"], "--pairs needs scorer:rule"),
        (["audit", "mtbench", "--hide-labels", "1.5"], "--hide-labels must be in (0, 1)"),
    ],
)
def test_bad_options_fail_before_any_data_or_model_is_loaded(tmp_path, capsys, monkeypatch, argv, expected):
    import puaudit_jax.cli.inputs as cli

    def no_loading(*_, **__):
        raise AssertionError("data were loaded before the options were checked")

    monkeypatch.setattr(cli, "load_data", no_loading)
    assert expected in _fail([*argv, "--out", str(tmp_path / "out"), "--quiet"], capsys)


def test_an_unwritable_output_folder_fails_first(tmp_path, capsys, monkeypatch):
    import puaudit_jax.cli.inputs as cli

    monkeypatch.setattr(cli, "load_data", lambda *_: pytest.fail("data loaded before --out was checked"))
    (tmp_path / "file").write_text("")
    assert "--out " in _fail(["audit", "mtbench", "--out", str(tmp_path / "file" / "sub"), "--quiet"], capsys)


def test_debug_shows_the_traceback(files):
    with pytest.raises(ValueError, match="is a folder"):
        main(["audit", str(files / "folder.jsonl"), "--debug", "--out", str(files / "o")])


# property-based: loaders and the option parser never crash with a traceback, never accept garbage

CELLS = st.one_of(st.none(), st.text(max_size=8), st.integers(-3, 3), st.floats(allow_nan=True), st.booleans())
VERDICTS = st.sampled_from(["A", "B", "tie", "model_a", "2", "", "x", "missing", "C"])


@st.composite
def records(draw):
    rec = {k: draw(st.one_of(VERDICTS, CELLS)) if k in ("judge", "human") else draw(CELLS) for k in ROW}
    for key in draw(st.lists(st.sampled_from(sorted(ROW)), max_size=2)):
        rec.pop(key, None)
    return rec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(records(), min_size=1, max_size=5), kind=st.sampled_from(["jsonl", "csv", "parquet"]))
def test_loaders_either_load_a_valid_table_or_raise_a_named_value_error(tmp_path, rows, kind):
    import pandas as pd

    path = tmp_path / f"t.{kind}"
    frame = pd.DataFrame(rows)
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    elif kind == "csv":
        frame.to_csv(path, index=False)
    else:
        try:
            frame.astype(str).to_parquet(path)
        except Exception:  # pyarrow cannot store this frame: nothing to load
            return
    try:
        table = load_comparisons(path)
    except ValueError as err:
        assert str(path) in str(err) or "line" in str(err) or "record" in str(err)
        return
    assert len(table) == len(rows) and set(table["judge"]) <= {"A", "B", "tie"}
    assert set(table["human"]) <= {"A", "B", "tie", "missing"}


@settings(max_examples=60, deadline=None)
@given(
    option=st.sampled_from(
        [
            "--eta",
            "--alpha1",
            "--holdout",
            "--folds",
            "--min-group-size",
            "--flip-threshold",
            "--confidence",
            "--batch-size",
            "--max-length",
            "--m",
        ]
    ),
    value=st.one_of(
        st.integers(-5, 5).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str), st.text(max_size=4)
    ),
)
def test_the_option_parser_never_accepts_an_invalid_value_silently(option, value):
    """Each value is rejected by argparse (SystemExit), rejected by validation (CommandError), or valid."""
    import puaudit_jax.cli.inputs as cli

    checked = {}

    def stop(*_, **__):
        checked["passed"] = True
        raise _Stop

    original = cli.load_data
    cli.load_data = stop
    try:
        main(["audit", "mtbench", option, value, "--out", "/tmp/puaudit-fuzz-out", "--quiet"])
    except _Stop:
        pass
    except SystemExit as err:
        assert err.code == 2
        return
    finally:
        cli.load_data = original
    assert checked, "the command neither failed nor reached the data"
    number = float(value)  # accepted: it must be a valid value of that option
    valid = {"--eta": 0 <= number <= 1, "--alpha1": 0 < number <= 1, "--holdout": 0 <= number < 1,
             "--folds": number >= 2, "--min-group-size": number >= 1, "--flip-threshold": 0 < number < 1,
             "--confidence": 0 < number < 1, "--batch-size": number >= 1, "--max-length": number >= 1,
             "--m": 0 < number <= 1}  # fmt: skip
    assert valid[option] and np.isfinite(number), (option, value)


class _Stop(Exception):
    pass


def test_model_folders_that_are_files_or_truncated_are_named(files, tmp_path, capsys):
    from probes.models.pretrained import resolve

    (files / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    argv = ["audit", str(files / "ok.jsonl"), "--out", str(tmp_path / "o"), "--quiet", "--no-cache", "--encoder"]
    assert "nosuffix: no such model folder" in _fail([*argv, str(files / "nosuffix")], capsys)
    source, broken = resolve("minilm"), tmp_path / "broken-minilm"
    broken.mkdir()
    for item in source.iterdir():
        if item.name != "model.safetensors":
            (broken / item.name).symlink_to(item)
    (broken / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes()[: 1 << 20])
    assert "model.safetensors: truncated safetensors file" in _fail([*argv, str(broken)], capsys)
