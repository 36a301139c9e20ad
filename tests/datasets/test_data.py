"""Tests of the data layer (puaudit_jax.datasets) and of the bundled data files.

Independent checks read the raw bundled files with json / csv only (no pandas, no package code),
so the loaders' joins and vote aggregation are compared against a second implementation.
Every test also checks that nothing was opened outside the repository's own files (no shared dir).
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from puaudit_jax.datasets import (
    BUNDLED,
    Comparison,
    ComparisonValidationError,
    aggregate_votes,
    agreement,
    comparisons_to_frame,
    conversation,
    data_path,
    exclusion_counts,
    exclusions,
    item_status,
    load_bundled,
    load_comparisons,
    load_hh_rlhf,
    load_uda_scores,
    load_usr_topicalchat,
    normalize_verdict,
    reference_path,
    save_comparisons,
    score_matrix,
    summarize,
    validate_comparisons,
)
from puaudit_jax.datasets.exclusions import REASONS
from tests.helpers import read_jsonl

REPO = Path(__file__).resolve().parents[2]  # tests/datasets/test_data.py -> the repository
RAW = REPO / "puaudit_jax" / "data"
_SHARED = "/".join(["", "work", "shared"])  # spelled in pieces so that the source scan below
_SHARED_RELATIVE = "/".join(["..", "shared"])  # does not find them in this file
_OPENED: list[str] = []


def _record_opens(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(args[0]))


sys.addaudithook(_record_opens)


@pytest.fixture(autouse=True)
def _nothing_read_from_shared():
    start = len(_OPENED)
    yield
    outside = [p for p in _OPENED[start:] if _SHARED in p or _SHARED_RELATIVE in p.replace("\\", "/")]
    assert not outside, f"opened files outside the project: {outside[:3]}"


# fixtures mtbench and llmfao4 (load_bundled("mtbench"), load_bundled("llmfao-gpt4")) are in tests/conftest.py


# --------------------------------------------------------------------------------------------------
# independent readers of the raw files


def _plurality(votes):
    counts = Counter(votes)
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    return winners[0] if len(winners) == 1 else "tie"


def _raw_mtbench():
    """key -> (gpt4 verdict, human plurality verdict or None), from the raw jsonl files."""
    to_abt = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (inconsistent)": "tie"}
    votes = defaultdict(list)
    for v in read_jsonl(RAW / "mtbench" / "human_votes_partial.jsonl"):
        votes[(v["question_id"], v["model_a"], v["model_b"], v["turn"])].append(to_abt[v["winner"]])
    items = {}
    for g in read_jsonl(RAW / "mtbench" / "gpt4_pair_partial.jsonl"):
        key = (g["question_id"], g["model_a"], g["model_b"], g["turn"])
        items[key] = (to_abt[g["winner"]], _plurality(votes[key]) if key in votes else None)
    return items, votes


def _raw_llmfao(judge):
    to_abt = {"left": "A", "right": "B", "tie": "tie"}
    votes = defaultdict(list)
    with open(RAW / "llmfao" / "crowd-comparisons.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            votes[row["id"]].append(to_abt[row["winner"]])
    with open(RAW / "llmfao" / f"{judge}-crowd-comparisons.csv", newline="", encoding="utf-8") as handle:
        return {row["id"]: (to_abt[row["winner"]], _plurality(votes[row["id"]])) for row in csv.DictReader(handle)}


def _decisive_agreement(items):
    both = [(j, h) for j, h in items if j in ("A", "B") and h in ("A", "B")]
    return sum(j == h for j, h in both) / len(both), len(both)


# --------------------------------------------------------------------------------------------------
# MT-Bench


def test_mtbench_counts_match_the_data_readme(mtbench):
    assert len(mtbench) == 1240  # one row per GPT-4 verdict
    assert mtbench["id"].is_unique
    labelled = mtbench[mtbench["human"] != "missing"]
    assert len(labelled) == 1232  # the README's (question, pair, turn) items with both verdicts
    unlabelled = mtbench[mtbench["human"] == "missing"]
    assert len(unlabelled) == 8 and set(unlabelled["turn"]) == {2} and (unlabelled["n_votes"] == 0).all()
    assert int(mtbench["n_votes"].sum()) == 1751  # every vote is accounted for
    assert mtbench["judge"].value_counts().to_dict() == {"B": 827, "tie": 304, "A": 109}
    assert int((mtbench["judge_raw"] == "tie (inconsistent)").sum()) == 196
    assert mtbench["human"].value_counts().to_dict() == {"B": 704, "tie": 357, "A": 171, "missing": 8}
    assert int(mtbench["human_split"].sum()) == 99
    assert set(mtbench["question_type"]) == {
        "writing",
        "roleplay",
        "reasoning",
        "math",
        "coding",
        "extraction",
        "stem",
        "humanities",
    }
    assert len(load_bundled("mtbench", include_unlabelled=False)) == 1232


def test_mtbench_agreement_equals_independent_computation(mtbench):
    items, _ = _raw_mtbench()
    expected, n = _decisive_agreement([v for v in items.values() if v[1] is not None])
    assert agreement(mtbench) == (expected, n)
    assert n == 757 and round(expected, 4) == 0.8705
    three_way = [j == h for j, h in items.values() if h is not None]
    assert agreement(mtbench, ties="include") == (sum(three_way) / len(three_way), 1232)


def test_mtbench_rows_equal_the_raw_files(mtbench):
    items, votes = _raw_mtbench()
    questions = {q["question_id"]: q for q in read_jsonl(RAW / "mtbench" / "question.jsonl")}
    answers = {}
    for path in (RAW / "mtbench" / "model_answer").glob("*.jsonl"):
        for a in read_jsonl(path):
            answers[(a["question_id"], path.stem)] = a["choices"][0]["turns"]
    for row in mtbench.itertuples():
        key = (row.question_id, row.model_a, row.model_b, row.turn)
        judge, human = items[key]
        assert (row.judge, row.human) == (judge, human or "missing")
        assert row.n_votes == len(votes.get(key, []))
        assert row.question_type == questions[row.question_id]["category"]
        turns_a, turns_b = answers[(row.question_id, row.model_a)], answers[(row.question_id, row.model_b)]
        assert (row.response_a or "") == turns_a[row.turn - 1] and (row.response_b or "") == turns_b[row.turn - 1]
        if row.turn == 1:
            assert row.question == questions[row.question_id]["turns"][0]
            assert row.history_a == [] and row.history_b == []
        else:  # turn 2: shared user turns in question, each side's own first answer in its history
            assert row.question == questions[row.question_id]["turns"][:2]
            assert row.history_a == turns_a[:1] and row.history_b == turns_b[:1]


def test_turn2_conversation_rebuilds_each_sides_chat(mtbench):
    row = mtbench[mtbench["turn"] == 2].iloc[0]
    chat = conversation(row["question"], row["history_a"], row["response_a"])
    assert [m["role"] for m in chat] == ["user", "assistant", "user", "assistant"]
    assert chat[0]["content"] == row["question"][0] and chat[1]["content"] == row["history_a"][0]
    assert chat[3]["content"] == row["response_a"]
    assert conversation("q", [], "r") == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]
    with pytest.raises(ValueError, match="earlier answers"):
        conversation(["q1", "q2"], [], "r")


# --------------------------------------------------------------------------------------------------
# LLMFAO


@pytest.mark.parametrize("judge, n_agree, expected", [("gpt4", 1043, 0.7459), ("gpt3", 971, 0.6313)])
def test_llmfao_agreement_equals_independent_computation(judge, n_agree, expected):
    table = load_bundled(f"llmfao-{judge}")
    raw = _raw_llmfao(judge)
    assert len(table) == len(raw) == 2139
    value, n = _decisive_agreement(list(raw.values()))
    assert agreement(table) == (value, n)
    assert n == n_agree and round(value, 4) == expected
    by_id = {row.pair_id: (row.judge, row.human) for row in table.itertuples()}
    assert by_id == {int(k): v for k, v in raw.items()}


def test_llmfao_votes_ties_and_unlabelled_pool(llmfao4):
    assert int(llmfao4["n_votes"].sum()) == 8931
    assert llmfao4["human"].value_counts().to_dict() == {"tie": 1080, "A": 559, "B": 500}
    assert int(llmfao4["human_split"].sum()) == 308
    assert {"prompt", "pair_id", "model_a", "model_b", "votes_a", "votes_b", "votes_tie"} <= set(llmfao4.columns)
    # the crowd voted on 13 of the 19 prompts (no code prompt); the unvoted pairs are the other 6 prompts
    assert llmfao4["prompt"].nunique() == 13
    assert set(llmfao4["question_type"]) == {"creativity", "instruct", "knowledge", "reflexion"}
    for judge in ("gpt4", "gpt3"):
        full = load_bundled(f"llmfao-{judge}", include_unlabelled=True)
        assert len(full) == 3236 and int((full["human"] == "missing").sum()) == 1097
        assert (full.loc[full["human"] == "missing", "n_votes"] == 0).all()
        assert full["id"].is_unique
        pool = full[full["human"] == "missing"]
        assert set(pool["prompt"]) == {1, 3, 14, 15, 18, 19} and not set(pool["prompt"]) & set(llmfao4["prompt"])
        assert pool["question_type"].value_counts().to_dict() == {"code": 780, "reflexion": 165, "creativity": 152}
    decisive = load_bundled("llmfao-gpt4", vote_rule="decisive")
    assert int((decisive["human"] == "tie").sum()) == 435


def test_llmfao_response_a_is_the_left_model(llmfao4):
    results = {(r["prompt"], r["model"]): r["result"] for r in read_jsonl(RAW / "llmfao" / "results.jsonl")}
    row = llmfao4.iloc[0]
    assert (row["response_a"] or "") == results[(row["prompt"], row["model_x"])]
    assert (row["response_b"] or "") == results[(row["prompt"], row["model_y"])]


# --------------------------------------------------------------------------------------------------
# exclusions: every id accounted for


def test_item_status_accounts_for_every_row(mtbench, llmfao4):
    for table in (mtbench, llmfao4):
        status = item_status(table)
        assert status["id"].tolist() == table["id"].tolist()
        usable = status["status"] != "excluded"
        assert (status.loc[usable, "reason"] == "").all() and (status.loc[~usable, "reason"] != "").all()
        assert exclusions(table)["id"].tolist() == status.loc[~usable, "id"].tolist()
    summary = summarize(mtbench)
    assert (summary["labelled"], summary["unlabelled"], summary["excluded"]) == (755, 6, 479)
    assert summary["exclusion_reasons"] == {
        "missing text: question": 0,
        "missing text: response_a": 2,
        "missing text: response_b": 0,
        "identical responses": 9,
        "judge tie": 304,
        "no judge verdict": 0,
        "human tie": 258,
        "human split vote": 99,
    }


def test_each_exclusion_reason_on_a_hand_made_table():
    table = comparisons_to_frame(
        [
            Comparison("ok", "q", "x", "y", "A", "B"),
            Comparison("pool", "q", "x", "y", "B"),
            Comparison("no-text", "q", "", "y", "A", "A"),
            Comparison("blank-question", ("  ", ""), "x", "y", "A", "A"),
            Comparison("same", "q", "x ", "x", "A", "A"),
            Comparison("judge-tie", "q", "x", "y", "tie", "A"),
            Comparison("human-tie", "q", "x", "y", "A", "tie"),
            Comparison("split", "q", "x", "y", "A", "tie", extra={"human_split": True}),
            Comparison("two", "q", None, "y", "tie", "missing"),
        ]
    )
    status = item_status(table).set_index("id")
    assert status.loc["ok", "status"] == "labelled" and status.loc["pool", "status"] == "unlabelled"
    assert status.loc["no-text", "reason"] == "missing text: response_a"
    assert status.loc["blank-question", "reason"] == "missing text: question"
    assert status.loc["same", "reason"] == "identical responses"
    assert status.loc["judge-tie", "reason"] == "judge tie"
    assert status.loc["human-tie", "reason"] == "human tie"
    assert status.loc["split", "reason"] == "human split vote"
    assert status.loc["two", "reason"] == "missing text: response_a; judge tie"
    assert exclusion_counts(table)["judge tie"] == 2


def test_every_exclusion_reason_the_code_gives_is_counted_and_documented_in_output_files():
    """``no judge verdict`` was given but missing from REASONS (so the summary's counts left those rows out), and
    the audit's ``zero difference embedding`` was missing from docs/output-files.md."""
    from puaudit_jax.audit import ZERO_DIFF

    table = comparisons_to_frame(
        [
            Comparison("no-text", "", "", "", "A", "A"),
            Comparison("same", "q", "x", "x", "A", "A"),
            Comparison("judge-tie", "q", "x", "y", "tie", "tie"),
            Comparison("no-judge", "q", "x", "y", "missing", "A"),
            Comparison("split", "q", "x", "y", "A", "tie", extra={"human_split": True}),
        ]
    )
    given = set(item_status(table)["reason"].str.split("; ").explode())
    assert given <= set(REASONS) and exclusion_counts(table)["no judge verdict"] == 1
    docs = (REPO / "docs" / "output-files.md").read_text(encoding="utf-8")
    row = next(line for line in docs.splitlines() if line.startswith("| `reason` | why the row was excluded"))
    assert [r for r in (*REASONS, ZERO_DIFF) if f"`{r}`" not in row] == []


# --------------------------------------------------------------------------------------------------
# verdicts and votes


@pytest.mark.parametrize(
    "spelling, normal",
    [
        ("A", "A"),
        ("a", "A"),
        (" model_A ", "A"),
        ("LEFT", "A"),
        ("1", "A"),
        (1, "A"),
        (1.0, "A"),
        ("B", "B"),
        ("Model_b", "B"),
        ("right", "B"),
        ("2", "B"),
        (2, "B"),
        ("tie", "tie"),
        ("TIE", "tie"),
        ("draw", "tie"),
        ("C", "tie"),
        ("tie (inconsistent)", "tie"),
        ("tie (bothbad)", "tie"),
    ],
)
def test_verdict_spellings(spelling, normal):
    assert normalize_verdict(spelling, allow_missing=False) == normal


@pytest.mark.parametrize("value", [None, float("nan"), "", "missing", "NA", "null", "None"])
def test_missing_human_verdicts(value):
    assert normalize_verdict(value, allow_missing=True) == "missing"
    with pytest.raises(ValueError, match="missing"):
        normalize_verdict(value, allow_missing=False)


@pytest.mark.parametrize("value", ["maybe", 0, 3, 1.5, True, "model_c"])
def test_unknown_verdicts(value):
    with pytest.raises(ValueError, match="verdict"):
        normalize_verdict(value, allow_missing=True)


def test_vote_rules_by_hand():
    votes = pd.DataFrame(
        {
            "item": [1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 4],
            "vote": ["A", "A", "B", "A", "B", "A", "tie", "tie", "A", "A", "tie", "tie", "B"],
        }
    )
    plural = aggregate_votes(votes, ["item"]).set_index("item")
    assert plural["human"].tolist() == ["A", "tie", "tie", "tie"]
    assert plural["human_split"].tolist() == [False, True, False, True]
    assert plural[["votes_a", "votes_b", "votes_tie"]].loc[4].tolist() == [2, 1, 2]
    decisive = aggregate_votes(votes, ["item"], rule="decisive").set_index("item")
    assert decisive["human"].tolist() == ["A", "tie", "A", "A"]
    with pytest.raises(ValueError, match="rule"):
        aggregate_votes(votes, ["item"], rule="median")


# --------------------------------------------------------------------------------------------------
# validation messages name the row and the column


def _problems(error):
    return {(p.label, p.column): p.message for p in error.value.problems}


def test_jsonl_validation_names_line_id_and_column(tmp_path):
    lines = [
        {"id": "ok", "question": "q", "response_a": "x", "response_b": "y", "judge": "A", "human": "B"},
        {"id": "bad-verdict", "question": "q", "response_a": "x", "response_b": "y", "judge": "maybe"},
        {"id": "", "question": "q", "response_a": "x", "response_b": "y", "judge": "A"},
        {"id": "ok", "question": "q", "response_a": "x", "response_b": "y", "judge": "B"},
        {"id": 7, "question": "q", "response_a": 42, "response_b": "y", "judge": "tie", "human": "perhaps"},
        {"id": "no-judge", "question": "q", "response_a": "x", "response_b": "y", "judge": None, "turn": 0},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(lines[0]) + "\n\n" + "\n".join(json.dumps(r) for r in lines[1:]) + "\n")
    with pytest.raises(ComparisonValidationError) as error:
        load_comparisons(path)
    found = _problems(error)
    assert "unknown verdict 'maybe'" in found[("line 3", "judge")]
    assert found[("line 4", "id")] == "empty id"
    assert found[("line 5", "id")] == "duplicate id 'ok' (first at line 1)"
    assert "expected text (str), got int 42" in found[("line 6", "response_a")]
    assert "unknown verdict 'perhaps'" in found[("line 6", "human")]
    assert "missing" in found[("line 7", "judge")] and "turn" in found[("line 7", "turn")]
    text = str(error.value)
    assert "line 6 (id '7'): column 'response_a': expected text (str), got int 42" in text
    assert "line 3 (id 'bad-verdict'): column 'judge'" in text
    assert len(error.value.problems) == 7


def test_missing_required_column_is_named(tmp_path):
    path = tmp_path / "cols.csv"
    path.write_text("id,question,response_a,judge\n1,q,x,A\n")
    with pytest.raises(ComparisonValidationError) as error:
        load_comparisons(path)
    assert [(p.column, p.label) for p in error.value.problems] == [("response_b", None)]
    assert "column 'response_b': required column is missing" in str(error.value)


def test_csv_validation_counts_file_lines_across_multiline_cells(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('id,question,response_a,response_b,judge,human\na,"two\nlines",x,y,left,right\nb,q,x,y,sideways,\n')
    with pytest.raises(ComparisonValidationError) as error:
        load_comparisons(path)
    assert list(_problems(error)) == [("line 4", "judge")]
    assert "line 4 (id 'b'): column 'judge': unknown verdict 'sideways'" in str(error.value)


def test_parquet_and_frame_validation_name_records(tmp_path):
    frame = pd.DataFrame(
        {
            "id": ["a", "a"],
            "question": ["q", ["q1", 3]],
            "response_a": ["x", "x"],
            "response_b": ["y", "y"],
            "judge": ["A", "B"],
        }
    )
    with pytest.raises(ComparisonValidationError) as error:
        validate_comparisons(frame)
    assert set(_problems(error)) == {("row 2", "id"), ("row 2", "question")}
    odd_ids = pd.DataFrame(
        {"id": [1.5, " x", True], "question": "q", "response_a": "x", "response_b": "y", "judge": "A"}
    )
    with pytest.raises(ComparisonValidationError) as error:
        validate_comparisons(odd_ids)
    assert [p.label for p in error.value.problems] == ["row 1", "row 2", "row 3"]
    assert "whitespace" in error.value.problems[1].message
    path = tmp_path / "bad.parquet"
    pd.DataFrame(
        {
            "id": ["a", "b"],
            "question": ["q", "q"],
            "response_a": ["x", "x"],
            "response_b": ["y", "y"],
            "judge": ["A", "won"],
        }
    ).to_parquet(path)
    with pytest.raises(ComparisonValidationError) as error:
        load_comparisons(path)
    assert list(_problems(error)) == [("record 2", "judge")]


def test_user_files_accept_common_spellings_and_defaults(tmp_path):
    path = tmp_path / "user.csv"
    path.write_text("id,question,response_a,response_b,judge,human,score\n1,q,x,y,Model_A,2,0.5\n2,q,42,None,tie,,\n")
    table = load_comparisons(path)
    assert table["judge"].tolist() == ["A", "tie"] and table["human"].tolist() == ["B", "missing"]
    assert table["response_a"].tolist() == ["x", "42"] and table["response_b"].tolist() == ["y", "None"]
    assert table["id"].tolist() == ["1", "2"] and table["question_type"].isna().all()
    assert table["score"].tolist()[0] == 0.5 and np.isnan(table["score"].tolist()[1])  # extras as read
    assert list(table.columns[:8]) == [
        "id",
        "question",
        "response_a",
        "response_b",
        "judge",
        "human",
        "question_type",
        "turn",
    ]


# --------------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_round_trip(tmp_path, mtbench, llmfao4, suffix):
    for table in (mtbench, llmfao4):
        path = save_comparisons(table, tmp_path / f"table.{suffix}")
        pd.testing.assert_frame_equal(load_comparisons(path), table)
        assert [p.name for p in tmp_path.iterdir()] == [path.name]  # atomic write left no temporary file


# --------------------------------------------------------------------------------------------------
# the other bundled sets


def test_uda_matrices_reproduce_the_appendix_table4():
    scores = load_uda_scores()
    baseline = score_matrix(scores, "transfer_table6", "baseline")
    adapted = score_matrix(scores, "transfer_table6", "uda")
    assert baseline.shape == adapted.shape == (10, 10)
    assert score_matrix(scores, "transfer_table6", "human").shape == (1, 10)
    consensus = baseline.mean(axis=0)
    for matrix, pearson, mse in ((baseline, 0.7363, 43152.6), (adapted, 0.8778, 19452.7)):
        pearsons = [np.corrcoef(matrix.loc[j], consensus)[0, 1] for j in matrix.index]
        errors = [((matrix.loc[j] - consensus) ** 2).mean() for j in matrix.index]
        assert np.mean(pearsons) == pytest.approx(pearson, abs=5e-5)
        assert np.mean(errors) == pytest.approx(mse, abs=1.0)  # the transcribed scores carry 2 decimals
    with pytest.raises(KeyError, match="available"):
        score_matrix(scores, "arenahard", "human")


def test_usr_topicalchat_and_hh_rlhf():
    usr = load_usr_topicalchat()
    assert len(usr) == 360 and usr["dialogue"].nunique() == 60 and usr["system_id"].nunique() == 6
    assert usr.groupby("dialogue").size().eq(6).all() and usr["id"].is_unique
    assert usr["overall"].between(1, 5).all() and usr["groundedness"].between(0, 1).all()
    hh = load_hh_rlhf()
    assert len(hh) == 2312 and (hh["chosen"] != hh["rejected"]).all()


def test_bundled_files_are_in_the_package():
    for name in ("question.jsonl", "human_votes_partial.jsonl", "gpt4_pair_partial.jsonl", "judge_prompts.jsonl"):
        assert data_path("mtbench", name).is_file()
    assert len(list(data_path("mtbench", "model_answer").glob("*.jsonl"))) == 6
    assert data_path("mtbench", "reference_answer", "gpt-4.jsonl").is_file()
    for folder in ("mtbench", "llmfao", "uda", "usr_topicalchat", "hh_rlhf"):
        assert data_path(folder, "README.md").is_file()
    tables = sorted(p.name for p in reference_path("README.md").parent.glob("*.csv"))
    assert len(tables) == 7 and pd.read_csv(reference_path("puaudit_table6_p_ratio.csv"))["orig"].iloc[0] == 0.781
    assert set(BUNDLED) == {"mtbench", "llmfao-gpt4", "llmfao-gpt3"}
    with pytest.raises(ValueError, match="unknown bundled set"):
        load_bundled("chatbot-arena")
    with gzip.open(data_path("hh_rlhf", "harmless-base_test.jsonl.gz"), "rt") as handle:
        assert json.loads(handle.readline()).keys() == {"chosen", "rejected"}


def test_no_data_layer_source_refers_to_the_shared_directory():
    sources = list((REPO / "puaudit_jax" / "datasets").glob("*.py")) + [Path(__file__)]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert _SHARED not in text and _SHARED_RELATIVE not in text, path


def test_the_open_hook_sees_the_loaders_reads():
    start = len(_OPENED)
    load_usr_topicalchat()
    assert any(str(RAW / "usr_topicalchat") in p for p in _OPENED[start:])


_texts = st.one_of(st.none(), st.text(max_size=30))
_questions = st.one_of(
    _texts.filter(lambda t: t is None or not t.startswith("[")),  # see the csv note
    st.lists(st.text(max_size=20), min_size=1, max_size=3),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            _questions,
            _texts,
            _texts,
            st.sampled_from(["A", "B", "tie"]),
            st.sampled_from(["A", "B", "tie", "missing"]),
            st.one_of(st.none(), st.integers(1, 3)),
        ),
        min_size=1,
        max_size=6,
    ),
    suffix=st.sampled_from(["jsonl", "csv", "parquet"]),
)
def test_round_trip_of_arbitrary_text(tmp_path, rows, suffix):
    table = comparisons_to_frame(
        Comparison(f"id{k}", q, a, b, j, h, turn=t) for k, (q, a, b, j, h, t) in enumerate(rows)
    )
    path = save_comparisons(table, tmp_path / f"t.{suffix}")
    pd.testing.assert_frame_equal(load_comparisons(path), table)
