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
    (tmp_path / "fields.txt").write_text("x,y\n1,2\n")
    (tmp_path / "dup.csv").write_text("id,judge,judge,question,response_a,response_b\n1,A,B,q,a,b\n")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 truncated zip")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "ragged.csv").write_text(
        "id,question,response_a,response_b,judge,human\n1,q,a,b,A,B\n2,q,a,b,A,B,extra\n"
    )
    (tmp_path / "latin1.csv").write_bytes(b"judge,model_a,model_b,winner\nj,caf\xe9,m2,A\n")
    (tmp_path / "header.csv").write_text("judge,model_a,model_b,winner\n")
    (tmp_path / "plan.csv").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    "name, extra, expected",
    [
        ("empty.jsonl", [], "empty.jsonl: the file is empty"),
        ("latin1.jsonl", [], "latin1.jsonl: line 2: not UTF-8"),
        ("folder.jsonl", [], "folder.jsonl is a folder"),
        ("fields.txt", [], "fields.txt: no known format has the fields x, y"),  # read as CSV from the content
        ("dup.csv", [], "dup.csv: line 1: column(s) ['judge'] appear more than once"),
        ("data", ["--embeddings", "{root}/bad.npz"], "bad.npz: not a readable embeddings .npz"),
        ("empty.csv", [], "empty.csv: the file is empty (no header line"),  # was: "No columns to parse from file"
        ("ragged.csv", [], "ragged.csv: not a well-formed CSV table: Expected 6 fields in line 3, saw 7"),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_file(files, capsys, name, extra, expected):
    data = str(files / name) if name != "data" else str(files / "ok.jsonl")
    if name == "data":
        (files / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    argv = ["audit", data, "--out", str(files / "out"), "--quiet", *[e.format(root=files) for e in extra]]
    assert expected in _fail(argv, capsys)


def test_an_empty_label_plan_is_named(files, capsys):
    """Issue 40 (new case): `quantify --plan` of an empty plan.csv said "No columns to parse from file"."""
    (files / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    argv = ["quantify", str(files / "ok.jsonl"), "--plan", str(files / "plan.csv"), "--out", str(files / "out")]
    assert "plan.csv: not a label plan (the file is empty; write one with `puaudit plan-labels`)" in _fail(argv, capsys)


@pytest.mark.parametrize("command", ["scores", "align"])
@pytest.mark.parametrize(
    "name, expected",
    [
        ("empty.csv", "empty.csv: the file is empty (no header line"),  # was: "No columns to parse from file"
        ("header.csv", "header.csv: no rows in the file"),  # was: "scores must be a non-empty judges x ..."
        ("latin1.csv", "latin1.csv: line 2: not UTF-8 text"),  # was: "'utf-8' codec can't decode byte 0xe9 ..."
        ("ragged.csv", "ragged.csv: not a readable table"),
    ],
)
def test_bad_files_of_consensus_are_named(files, capsys, command, name, expected):
    """Issue 40 (new cases): consensus scores and align read their file with a bare pandas call."""
    assert expected in _fail(["consensus", command, str(files / name), "--out", str(files / "out")], capsys)


@pytest.mark.parametrize(
    "name, text, expected",
    [
        (
            "blank.csv",
            "judge,model_a,model_b,winner\nj,m1,m2,A\nj,m3,,A\n",
            "blank.csv: line 3, column 'model_b': no name",
        ),
        (
            "null.jsonl",
            '{"judge": "j", "model_a": "m1", "model_b": "m2", "winner": "A"}\n'
            '{"judge": "j", "model_a": null, "model_b": "m2", "winner": "A"}\n',
            "null.jsonl: line 2, column 'model_a'",
        ),
        ("nojudge.csv", "judge,model_a,model_b,winner\n,m1,m2,A\n", "nojudge.csv: line 2, column 'judge': no name"),
    ],
)
def test_a_verdict_without_a_judge_or_model_name_is_named(tmp_path, capsys, name, text, expected):
    """Before: a blank model_b became a model named "" with an Elo score, a blank judge a judge ""."""
    (tmp_path / name).write_text(text)
    assert expected in _fail(["consensus", "scores", str(tmp_path / name), "--out", str(tmp_path / "out")], capsys)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["audit", "mtbench", "--batch-size", "-3"], "batch_size must be an integer >= 1"),
        (["audit", "mtbench", "--batch-size", "0"], "batch_size must be an integer >= 1"),
        (["audit", "mtbench", "--max-length", "0"], "max_length must be an integer >= 1"),
        (["audit", "mtbench", "--eta", "2"], "eta must be in [0, 1]"),
        (["audit", "mtbench", "--folds", "1"], "folds must be an integer >= 2"),
        (["audit", "mtbench", "--guarantee", "1.2"], "guarantee must be in (0, 1)"),
        (["audit", "mtbench", "--guarantee", "0.9", "--delta", "0"], "delta must be in (0, 1)"),
        (["audit", "mtbench", "--guarantee", "0.9", "--rule", "paper"], "guarantee needs a calibrated rule"),
        (["audit", "mtbench", "--other-judges", "gpt4", "--rule", "two-sided"], "rule 'two-sided' reads no evidence"),
        (["audit", "mtbench", "--evidence", "style", "--rule", "paper"], "rule 'paper' reads none and would ignore it"),
        (["evaluate", "mtbench", "--seeds", "0"], "seeds must be >= 1"),
        (["evaluate", "mtbench", "--p-ratio", "1.5"], "p_ratio must be in (0, 1)"),
        (["evaluate", "mtbench", "--sweep", "eta=0.1"], "--sweep needs p_ratio="),
        (["evaluate", "mtbench", "--pairs", "knn:magic"], "--pairs needs scorer:rule"),
        (["evaluate", "mtbench", "--guarantee", "0.8", "--rules", "paper"], "the rules compared, ['paper'], give none"),
        (["audit", "mtbench", "--hide-labels", "1.5"], "--hide-labels must be in (0, 1)"),
        (["audit", "mtbench", "--seed", "-1"], "seed must be an integer >= 0"),
        (["evaluate", "mtbench", "--seed", "-1"], "seed must be an integer >= 0"),
        (["audit", "mtbench", "--holdout", "0"], "holdout must be > 0 when m is not given"),
        (["evaluate", "mtbench", "--holdout", "0"], "holdout must be > 0 when m is not given"),
        (["evaluate", "mtbench", "--holdout", "0", "--sweep", "m=0.5,1.5"], "got 1.5"),
        (["evaluate", "mtbench", "--sweep", "p_ratio=0.2,1"], "p_ratio must be in (0, 1)"),
        (["audit", "mtbench", "--embeddings", "e.npz", "--save-embeddings", "f.npz"], "--save-embeddings only"),
        (["quantify", "mtbench", "--encoder", "smollm2"], "--encoder only applies with --with-audit"),
        (["quantify", "mtbench", "--embeddings", "e.npz"], "--embeddings only applies with --with-audit"),
        (["quantify", "mtbench", "--devices", "2", "--mesh", "2"], "--devices, --mesh only apply with --with-audit"),
        (["quantify", "mtbench", "--coordinator", "h:1", "--num-processes", "2"], "--coordinator, --num-processes"),
        (["quantify", "mtbench", "--cluster-auto"], "--cluster-auto only applies with --with-audit"),
        (["quantify", "mtbench", "--style", "tokens,tokens"], "style: ['tokens'] named more than once"),
        (["quantify", "mtbench", "--batch-size", "4", "--no-cache"], "--no-cache, --batch-size only apply"),
        (["quantify", "mtbench", "--audit", "dir", "--encoder", "minilm"], "(--audit reads an audit, it runs none)"),
        (["plan-labels", "mtbench", "--encoder", "smollm2"], "--encoder only applies with --with-audit"),
        (["plan-labels", "mtbench", "--devices", "all"], "--devices only applies with --with-audit"),
    ],
)
def test_bad_options_fail_before_any_data_or_model_is_loaded(tmp_path, capsys, monkeypatch, argv, expected):
    import puaudit_jax.cli.inputs as cli

    def no_loading(*_, **__):
        raise AssertionError("data were loaded before the options were checked")

    monkeypatch.setattr(cli, "load_data", no_loading)
    assert expected in _fail([*argv, "--out", str(tmp_path / "out"), "--quiet"], capsys)


def test_holdout_0_goes_with_a_given_or_swept_m(tmp_path, monkeypatch):
    """m given (or swept): nothing is estimated on a holdout, so --holdout 0 passes the checks."""
    import puaudit_jax.cli.inputs as cli

    def stop(*_, **__):
        raise _Stop

    monkeypatch.setattr(cli, "load_data", stop)
    for extra in (["audit", "mtbench", "--m", "0.8"], ["evaluate", "mtbench", "--sweep", "m=0.5,0.9"]):
        with pytest.raises(_Stop):
            main([*extra, "--holdout", "0", "--out", str(tmp_path / "out"), "--quiet"])


def test_an_unwritable_output_folder_fails_first(tmp_path, capsys, monkeypatch):
    import puaudit_jax.cli.inputs as cli

    monkeypatch.setattr(cli, "load_data", lambda *_: pytest.fail("data loaded before --out was checked"))
    (tmp_path / "file").write_text("")
    assert "--out " in _fail(["audit", "mtbench", "--out", str(tmp_path / "file" / "sub"), "--quiet"], capsys)


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--cache-dir", "file", "cache_dir {root}/file: not a folder"),
        ("--cache-dir", "file/sub", "({root}/file is a file)"),
        ("--save-embeddings", "file/emb.npz", "--save-embeddings {root}/file/emb.npz: {root}/file is a file"),
        ("--save-embeddings", "folder", "--save-embeddings {root}/folder: is a folder, not a file"),
    ],
)
def test_unusable_cache_and_embedding_paths_fail_before_loading(tmp_path, capsys, monkeypatch, option, value, expected):
    import puaudit_jax.cli.inputs as cli

    monkeypatch.setattr(cli, "load_data", lambda *_, **__: pytest.fail("data loaded before the paths were checked"))
    (tmp_path / "file").write_text("")
    (tmp_path / "folder").mkdir()
    argv = ["audit", "mtbench", option, str(tmp_path / value), "--out", str(tmp_path / "out"), "--quiet"]
    assert expected.format(root=tmp_path) in _fail(argv, capsys)


def test_cache_and_seed_settings_are_checked_by_the_config_classes(tmp_path):
    """The Python API refuses what the command line refuses (the configs' validate)."""
    from puaudit_jax.audit import AuditConfig
    from puaudit_jax.audit.embed import EmbedConfig

    (tmp_path / "file").write_text("")
    for bad, match in [({"seed": -1}, "seed must be"), ({"seed": 1.5}, "seed must be"), ({"holdout": 0}, "holdout")]:
        with pytest.raises(ValueError, match=match):
            AuditConfig(**bad).validate()
    AuditConfig(holdout=0, m=0.8).validate()  # m given: no holdout needed
    with pytest.raises(ValueError, match="cache_dir .*file: not a folder"):
        EmbedConfig(cache_dir=str(tmp_path / "file")).validate()
    EmbedConfig(cache_dir=str(tmp_path / "file"), no_cache=True).validate()  # no cache: the folder is unused
    EmbedConfig(cache_dir=str(tmp_path / "new" / "cache")).validate()  # created when first written


def _rows(n: int, **extra) -> list[dict]:
    return [{**ROW, "id": str(k), "judge": "AB"[k % 2], "human": "AB"[k % 3 == 0], **extra} for k in range(n)]


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def no_encoding(monkeypatch):
    import puaudit_jax.audit.embed as embed  # the CLI imports it when it embeds (lazy CLI)

    monkeypatch.setattr(embed, "table_embeddings", lambda *_, **__: pytest.fail("encoding started before the check"))


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["evaluate", "{data}", "--split-by", "prompt"], "--split-by prompt: no such column in {data}"),
        (["evaluate", "{data}", "--split-by", "group"], "--split-by group: 1 rows of {data} have no value there, e.g. "
                                                        "row 4 (id '3')"),
        (["evaluate", "{data}", "--cluster-by", "prompt"], "--cluster-by prompt: no such column"),
        (["audit", "{data}", "--cluster-by", "prompt"], "--cluster-by prompt: no such column"),
        (["quantify", "{data}", "--cluster-by", "prompt"], "--cluster-by prompt: no such column"),
        (["quantify", "{data}", "--raters", "judge,crowd"], "--raters crowd: no such column"),
    ],
)  # fmt: skip
def test_columns_the_options_name_are_checked_before_encoding(tmp_path, capsys, no_encoding, argv, expected):
    rows = _rows(8)
    for k, row in enumerate(rows):
        row["group"] = None if k == 3 else f"g{k // 2}"
    data = _jsonl(tmp_path / "d.jsonl", rows)
    argv = [a.format(data=data) for a in argv] + ["--out", str(tmp_path / "out"), "--quiet", "--no-figures"]
    assert expected.format(data=data) in _fail(argv, capsys)


def test_a_missing_model_name_is_refused_by_the_loader_naming_line_and_column(tmp_path, capsys):
    rows = _rows(6, model_a="m1", model_b="m2")
    rows[2]["model_a"], rows[4]["model_b"] = None, "  "
    data = _jsonl(tmp_path / "d.jsonl", rows)
    err = _fail(["quantify", data, "--out", str(tmp_path / "out"), "--no-figures"], capsys)
    assert "line 3 (id '2'): column 'model_a': missing model name" in err
    assert "line 5 (id '4'): column 'model_b': missing model name" in err


def test_multi_turn_rows_without_history_are_refused_before_encoding(tmp_path, capsys, no_encoding):
    rows = _rows(4, question=["u1", "u2"], history_a=["a1"], history_b=["b1"])
    rows[3]["human"] = "missing"  # a verdict to audit: a fully labelled table is refused before these checks matter
    rows[1]["history_b"] = None
    rows[2]["history_a"] = ["a1", "extra"]
    data = _jsonl(tmp_path / "d.jsonl", rows)
    err = _fail(["audit", data, "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert "line 2 (id '1'): column 'history_b': a 2-turn question needs this side's 1 earlier answer(s)" in err
    assert "line 3 (id '2'): column 'history_a'" in err
    for row in rows:
        row.pop("history_a"), row.pop("history_b")
    err = _fail(["audit", _jsonl(tmp_path / "d.jsonl", rows), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert "row 1 (id '0'): column 'history_a': column is missing; the 4 rows whose question is a list" in err


def test_multi_turn_rows_without_history_are_refused_by_the_audit_before_encoding():
    """The Python API too: a table handed to the audit with an encoder is checked before it is encoded."""
    import pandas as pd

    from puaudit_jax.audit import AuditConfig, run_audit
    from puaudit_jax.datasets import ComparisonValidationError

    table = pd.DataFrame(_rows(6, question=["u1", "u2"], history_a=["a1"], history_b=["b1"]))
    table.at[4, "history_a"] = []

    def encoder(_inputs):
        raise AssertionError("encoded before the histories were checked")

    with pytest.raises(ComparisonValidationError, match="row 5 .id '4'.: column 'history_a'"):
        run_audit(table, encoder, AuditConfig(m=0.8))


@pytest.mark.parametrize(
    "command, options",
    [("audit", []), ("audit", ["--guarantee", "0.8"]), ("evaluate", []), ("evaluate", ["--guarantee", "0.8"]),
     ("quantify", ["--with-audit"])],
)  # fmt: skip
def test_a_table_without_human_labels_is_refused_before_encoding(tmp_path, capsys, no_encoding, command, options):
    """Before, the audit embedded the whole table (22 s on a real one) and then found P empty; under --guarantee
    it said "label more rows" of a table with no human label at all."""
    rows = [{k: v for k, v in row.items() if k != "human"} for row in _rows(8, model_a="m1", model_b="m2")]
    data = _jsonl(tmp_path / "d.jsonl", rows)
    err = _fail([command, data, *options, "--out", str(tmp_path / "out"), "--no-figures"], capsys)
    assert f"{data}: no usable human-labelled comparison" in err
    assert "the table has no human labels (no `human` column, or no row labelled A, B or tie)" in err


def test_a_table_without_human_labels_is_refused_by_the_audit_before_encoding():
    """The Python API: with an encoder, with and without a guarantee."""
    import pandas as pd

    from puaudit_jax.audit import AuditConfig, run_audit

    table = pd.DataFrame(_rows(6)).assign(human="missing")

    def encoder(_inputs):
        raise AssertionError("encoded before the labels were checked")

    for config in (AuditConfig(), AuditConfig(guarantee=0.8)):
        with pytest.raises(ValueError, match="the table has no human labels .no `human` column, or no row labelled"):
            run_audit(table, encoder, config)


def test_with_audit_without_enough_labels_advises_what_quantify_can_do(tmp_path, capsys):
    """The audit --with-audit runs cannot calibrate on 12 labels: the advice is for quantify (it has no --rule)."""
    from puaudit_jax.audit.embed import save_embeddings
    from puaudit_jax.audit.synthetic import cone_comparisons
    from puaudit_jax.datasets import save_comparisons

    small = cone_comparisons(12, 30, d=16, seed=2)
    save_comparisons(small.table, tmp_path / "d.jsonl")
    save_embeddings(small.embeddings, tmp_path / "e.npz")
    argv = ["quantify", str(tmp_path / "d.jsonl"), "--embeddings", str(tmp_path / "e.npz"), "--with-audit",
            "--out", str(tmp_path / "out"), "--no-figures"]  # fmt: skip
    err = _fail(argv, capsys)
    assert "--with-audit: the audit gave no P(judge wrong)" in err and "--rule" not in err


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
    assert len(table) == len(rows) and set(table["judge"]) <= {"A", "B", "tie", "missing"}
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

    (files / "ok.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "id": "2", "human": None}) + "\n")
    argv = ["audit", str(files / "ok.jsonl"), "--out", str(tmp_path / "o"), "--quiet", "--no-cache", "--encoder"]
    assert "nosuffix: no such model folder" in _fail([*argv, str(files / "nosuffix")], capsys)
    source, broken = resolve("minilm"), tmp_path / "broken-minilm"
    broken.mkdir()
    for item in source.iterdir():
        if item.name != "model.safetensors":
            (broken / item.name).symlink_to(item)
    (broken / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes()[: 1 << 20])
    assert "model.safetensors: truncated safetensors file" in _fail([*argv, str(broken)], capsys)


# every command: a bad input is one `error: ...` line and a non-zero status, never a traceback

BAD_INPUT = {  # a bad file or option value per command (a command missing here fails the test below)
    "audit": ["audit", "{root}/missing.jsonl", "--out", "{root}/o"],
    "evaluate": ["evaluate", "{root}/missing.jsonl", "--out", "{root}/o"],
    "demo": ["demo", "--eta", "2", "--out", "{root}/o"],
    "quantify": ["quantify", "{root}/missing.jsonl", "--out", "{root}/o"],
    "plan-labels": ["plan-labels", "{root}/missing.jsonl", "--out", "{root}/o"],
    "convert": ["convert", "{root}/missing.jsonl", "--out", "{root}/o.csv"],
    "monitor": ["monitor", "{root}/missing.jsonl", "--order", "batch", "--out", "{root}/o"],
    "attack": ["attack", "{root}/missing.jsonl", "--attack", "length", "--out", "{root}/o"],
    "judge": ["judge", "{root}/missing.jsonl", "--out", "{root}/o"],
    "serve-local": ["serve-local", "--port", "-5"],
    "consensus scores": ["consensus", "scores", "{root}/missing.csv", "--out", "{root}/o"],
    "consensus align": ["consensus", "align", "{root}/missing.csv", "--out", "{root}/o"],
    "consensus table4": ["consensus", "table4", "--no-such-option"],
    "probe fit": ["probe", "fit", "--data", "{root}/missing.jsonl", "--target", "score", "--out", "{root}/p.pkl"],
    "probe predict": [
        "probe",
        "predict",
        "--model",
        "{root}/missing.pkl",
        "--data",
        "{root}/d.jsonl",
        "--out",
        "{root}/p.csv",
    ],  # fmt: skip
}
MORE_BAD_INPUT = [  # the ways out that are not a missing file: argparse's own errors, a command's SystemExit
    ["audit", "mtbench", "--eta", "x"],
    ["quantify", "mtbench", "--no-such-option"],
    ["probe", "predict", "--model", "{root}/m.pkl", "--data", "{root}/d.jsonl", "--out", "{root}/p.csv",
     "--devices", "999"],
]  # fmt: skip


def _commands(parser, prefix=()) -> list[str]:
    """Every runnable command of ``parser``: "audit", ..., "consensus scores", "probe fit", ..."""
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [" ".join(prefix)]
    return [c for name, p in subs[0].choices.items() for c in _commands(p, (*prefix, name))]


def _one_error_line(argv, root, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main([a.format(root=root) for a in argv])
    assert info.value.code not in (0, None)
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_every_command_has_a_bad_input_case():
    from puaudit_jax.cli import build_parser

    assert sorted(_commands(build_parser())) == sorted(BAD_INPUT)


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_every_command_fails_a_bad_input_with_one_error_line(command, tmp_path, capsys):
    err = _one_error_line(BAD_INPUT[command], tmp_path, capsys)
    assert "missing" in err or "-5" in err or "--no-such-option" in err or "eta" in err


@pytest.mark.parametrize("argv", MORE_BAD_INPUT, ids=lambda argv: " ".join(argv[:3]))
def test_parser_and_command_exits_read_error_too(argv, tmp_path, capsys):
    err = _one_error_line(argv, tmp_path, capsys)
    assert any(word in err for word in ("--eta", "--no-such-option", "--devices")), err


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("blank.csv", "prompt,response,score\nq,fine,1\nq,,2\n", "blank.csv: line 3, column 'response': no text"),
        (
            "json.csv",
            'messages,score\n"[{""role"": ""user"", ""content"": ""q""}]",1\nnot json,2\n',
            "json.csv: line 3, column 'messages': not JSON",
        ),
        (
            "score.csv",
            "prompt,response,score\nq,fine,1\nq,ok,good\n",
            "rows without a finite 'score' score, the first data row 2 ('good')",
        ),
    ],
)
def test_probe_data_name_the_row_of_a_missing_text_or_score(tmp_path, capsys, name, text, expected):
    """Before: a blank response was encoded as the text "nan"; a bad JSON cell or score named no row."""
    (tmp_path / name).write_text(text)
    argv = ["probe", "fit", "--data", str(tmp_path / name), "--target", "score", "--components", "1"]
    assert expected in _fail([*argv, "--out", str(tmp_path / "p.pkl")], capsys)


VERDICT_CSV = "judge,model_a,model_b,winner\nj1,m1,m2,A\nj1,m2,m3,B\nj1,m1,m3,tie\nj2,m1,m2,B\nj2,m2,m3,A\nj2,m1,m3,A\n"


@pytest.mark.parametrize(
    "options, expected",
    [
        (
            ["--method", "elo", "--ties", "davidson", "--n-boot", "30"],
            "method 'elo' ignores Bradley-Terry's settings "
            "n_boot, ties: leave them at their defaults, or use method 'bt'",
        ),
        (["--k", "8"], "method 'bt' ignores Elo's settings k"),
    ],
)
def test_consensus_scores_refuses_the_other_methods_settings(tmp_path, capsys, options, expected):
    """Before: --method elo ran with --ties, --ridge and --n-boot silently dropped (run.json said n_boot 30)."""
    (tmp_path / "v.csv").write_text(VERDICT_CSV)
    assert expected in _fail(["consensus", "scores", str(tmp_path / "v.csv"), *options, "--out", str(tmp_path / "o")],
                             capsys)  # fmt: skip
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_consensus_scores_keeps_one_runs_files_in_its_folder(tmp_path, capsys):
    """Before: an Elo run into a folder of a bootstrapped BT run left the BT run's intervals.csv beside it."""
    (tmp_path / "v.csv").write_text(VERDICT_CSV)
    base = ["consensus", "scores", str(tmp_path / "v.csv"), "--out", str(tmp_path / "o")]
    assert main([*base, "--ridge", "0.1", "--n-boot", "20"]) == 0
    assert (tmp_path / "o" / "intervals.csv").exists()
    assert main([*base, "--method", "elo"]) == 0
    assert not (tmp_path / "o" / "intervals.csv").exists() and (tmp_path / "o" / "manifest.json").exists()
    (tmp_path / "afile").write_text("")
    argv = ["consensus", "scores", str(tmp_path / "v.csv"), "--out", str(tmp_path / "afile")]
    assert f"--out {tmp_path / 'afile'}: {tmp_path / 'afile'} is a file, not a folder" in _fail(argv, capsys)


def test_encoding_options_with_given_embeddings_are_refused(tmp_path, capsys):
    """Before: --batch-size 0 --max-length -5 ran to completion with --embeddings (and were refused without)."""
    (tmp_path / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    argv = ["audit", str(tmp_path / "ok.jsonl"), "--embeddings", str(tmp_path / "e.npz"), "--out", str(tmp_path / "o")]
    err = _fail([*argv, "--batch-size", "0", "--max-length", "-5"], capsys)
    assert "--batch-size, --max-length only apply to computed embeddings, not with --embeddings" in err
    assert "--no-cache only applies" in _fail([*argv, "--no-cache"], capsys)


@pytest.mark.parametrize("option", ["--other-judges", "--cluster-by"])
def test_demo_checks_its_columns_before_embedding(tmp_path, capsys, monkeypatch, option):
    """Before: ``demo --other-judges nosuch`` embedded 761 comparisons (43 s) before its error."""
    from puaudit_jax.cli import inputs

    def embedded(*args, **kwargs):
        raise AssertionError("the demo embedded its data before checking the option's column")

    monkeypatch.setattr(inputs, "features", embedded)
    assert "nosuch" in _fail(["demo", option, "nosuch", "--out", str(tmp_path / "d"), "--quiet"], capsys)


def test_a_bad_score_cell_a_negative_plan_seed_and_a_missing_audit_are_named(tmp_path, capsys):
    """Before: numpy's or pandas' words ("could not convert string to float: 'abc'", "expected non-negative
    integer", "[Errno 2] No such file or directory: 'nosuch'")."""
    (tmp_path / "m.csv").write_text("judge,m1,m2\nj1,1.0,abc\nj2,2.0,3.0\n")
    err = _fail(["consensus", "align", str(tmp_path / "m.csv"), "--out", str(tmp_path / "o")], capsys)
    assert "m.csv: line 2, judge 'j1', model 'm2': not a finite score ('abc'; 1 such cells)" in err
    (tmp_path / "ok.jsonl").write_text(json.dumps(ROW) + "\n")
    data = str(tmp_path / "ok.jsonl")
    err = _fail(["plan-labels", data, "--seed", "-1", "--out", str(tmp_path / "p")], capsys)
    assert "seed must be an integer >= 0" in err
    err = _fail(["quantify", data, "--audit", str(tmp_path / "nosuch"), "--out", str(tmp_path / "q")], capsys)
    assert "nosuch: no such audit folder or items file" in err


@pytest.mark.parametrize("command", ["quantify", "plan-labels"])
@pytest.mark.parametrize(
    "name, text",
    [
        ("x.jsonl", '{"id": "1", "q": "a"}\n{"id": "2", "q": "b"}\n{"id": "3", "q": "a, b, c, d", "more": "f, g"}\n'),
        ("items.csv", "id,judge\n1,A\n"),
        ("bad.parquet", "not a parquet file"),
    ],
)
def test_an_audit_file_that_is_not_an_items_table_is_named_with_its_option(tmp_path, capsys, command, name, text):
    """Before: "Error tokenizing data. C error: Expected 3 fields in line 2, saw 7", naming neither the option nor
    the file."""
    (tmp_path / name).write_text(text)
    argv = [command, "mtbench", "--audit", str(tmp_path / name), "--out", str(tmp_path / "out"), "--no-figures"]
    err = _fail(argv + (["--budget", "5"] if command == "plan-labels" else []), capsys)
    assert f"--audit {tmp_path / name}: not an audit's items table" in err
    assert "expected an audit's --out folder, or its items.csv / items.parquet with columns" in err


@pytest.mark.parametrize("command", ["audit", "evaluate", "demo"])
def test_human_ties_disagree_embeds_the_human_tie_rows_it_calibrates_on(tmp_path, monkeypatch, command):
    """Under --human-ties disagree a labelled tie is a calibration row, audited as a pool row: it needs its
    embedding. The commands embedded only the rows usable with their labels: "79 usable comparisons have no
    embeddings" on MT-Bench."""
    import puaudit_jax.audit.embed as embed
    from puaudit_jax.datasets import item_status, load_data

    seen = []

    def capture(table, *_, **__):
        seen.append(table)
        raise KeyboardInterrupt  # stop here: what was asked to be embedded is the test

    monkeypatch.setattr(embed, "table_embeddings", capture)
    rows = _rows(8)
    rows[2]["human"] = "tie"
    rows[7]["human"] = "missing"  # a verdict to audit
    data = _jsonl(tmp_path / "d.jsonl", rows) if command != "demo" else None
    argv = [command, *([data] if data else []), "--guarantee", "0.8", "--human-ties", "disagree"]
    with pytest.raises(SystemExit):
        main([*argv, "--out", str(tmp_path / "out"), "--quiet", "--no-figures"])
    given = item_status(load_data(data or "mtbench")).set_index("id")
    tied = given.index[given["reason"].isin(["human tie", "human split vote"])]
    embedded = item_status(seen[0]).set_index("id").loc[tied, "status"]
    assert len(tied) and (embedded != "excluded").all()


@pytest.mark.parametrize(
    "scale, expected",
    [
        ("5,1", "--scale 5,1: low must be below high"),
        ("1,1", "--scale 1,1: low must be below high"),
        ("1,3,5", "--scale 1,3,5: two finite numbers low,high"),
        ("1,inf", "--scale 1,inf: two finite numbers"),
    ],
)
def test_probe_fit_checks_its_scale_before_reading_or_encoding(tmp_path, capsys, monkeypatch, scale, expected):
    """Before: --scale 5,1 failed after 15 s of encoding, naming no option."""
    import probes.fitted as fitted

    monkeypatch.setattr(fitted, "read_dialogues", lambda *_: pytest.fail("data read before --scale was checked"))
    argv = ["probe", "fit", "--data", str(tmp_path / "d.jsonl"), "--target", "score", "--scale", scale]
    assert expected in _fail([*argv, "--out", str(tmp_path / "p.pkl")], capsys)


def test_a_full_disk_names_the_output_folder_and_the_file(tmp_path, capsys, monkeypatch):
    """Before: "error: [Errno 28] No space left on device", naming neither --out nor the file."""
    import errno

    import pandas as pd

    def full(*_, **__):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "v.csv").write_text(VERDICT_CSV)
    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    argv = ["consensus", "scores", str(tmp_path / "v.csv"), "--ridge", "0.1", "--n-boot", "5"]
    err = _fail([*argv, "--out", str(tmp_path / "o")], capsys)
    assert f"error: --out {tmp_path / 'o'}: the disk is full (no space left on device) writing {tmp_path / 'o'}/" in err
    assert ".puaudit-run-" not in err and "free some space" in err
    assert not any(p.name.endswith(".csv") for p in (tmp_path / "o").iterdir())  # nothing half-written left
    from puaudit_jax.cli.main import DISK_FULL
    from puaudit_runtime.files import DISK_FULL as RUNTIME_DISK_FULL

    assert DISK_FULL == RUNTIME_DISK_FULL  # written twice: the parser imports no numpy
