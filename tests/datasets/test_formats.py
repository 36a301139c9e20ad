"""The readers of the field's formats (puaudit_jax.datasets.formats) on the bundled real samples."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.datasets import FORMATS, ReadConfig, load_comparisons, read_comparisons, save_comparisons
from puaudit_jax.datasets.paths import data_path
from puaudit_jax.datasets.read_config import FORMAT_NAMES
from puaudit_jax.datasets.reward_pairs import swapped

ALPACA = data_path("formats", "alpaca_eval")
FASTCHAT = data_path("formats", "fastchat", "mt_bench")
PAIRS = data_path("formats", "reward_pairs", "hh_rlhf_harmless_base_test.jsonl")
ANNOTATORS = ("weighted_alpaca_eval_gpt4_turbo", "alpaca_eval_gpt4_turbo_fn", "alpaca_eval_cot_gpt4_turbo_fn")


def _alpaca(name: str) -> Path:
    return ALPACA / f"{name}.json"


def test_the_registry_and_the_light_config_list_the_same_formats():
    assert tuple(FORMATS) == FORMAT_NAMES
    for name, module in FORMATS.items():
        assert module.NAME == name and module.detect(module.FIELDS) and module.IDS


# ------------------------------------------------------------------ AlpacaEval


def test_alpaca_eval_keeps_every_record_its_verdicts_and_its_soft_preference():
    raw = json.loads(_alpaca(ANNOTATORS[0]).read_text())
    read = read_comparisons([_alpaca(a) for a in ANNOTATORS])
    table, report = read.table, read.report
    assert report.format == "alpaca_eval" and report.records == 3 * len(raw) and len(table) == len(raw) == 80
    p = np.array([r["preference"] for r in raw]) - 1
    assert Counter(table["judge"]) == Counter(np.where(p > 0.5, "B", np.where(p < 0.5, "A", "tie")))
    np.testing.assert_allclose(table["judge_preference"], p)
    np.testing.assert_allclose(table["judge_confidence"], np.maximum(p, 1 - p))
    assert list(table["question"]) == [r["instruction"] for r in raw]
    assert set(table["model_b"]) == {"gpt-3.5-turbo-0301"} and (table["human"] == "missing").all()
    for annotator in ANNOTATORS[1:]:  # the other annotators' verdicts, row by row
        other = json.loads(_alpaca(annotator).read_text())
        expected = ["B" if r["preference"] > 1.5 else "A" if r["preference"] < 1.5 else "tie" for r in other]
        assert list(table[f"other_{annotator}"]) == expected
    soft = next(n for n in report.notes if "AlpacaEval's" in n)
    assert f"{100 * p.mean():.2f} %" in soft  # the judge's win rate as AlpacaEval computes it, not binarised


def test_alpaca_eval_ids_depend_only_on_the_record():
    alone = read_comparisons(_alpaca(ANNOTATORS[1])).table
    together = read_comparisons([_alpaca(a) for a in ANNOTATORS]).table
    assert list(alone["id"]) == list(together["id"]) and alone["id"].is_unique
    assert list(read_comparisons(_alpaca(ANNOTATORS[1])).table["id"]) == list(alone["id"])  # run to run


def test_alpaca_eval_null_preferences_are_kept_and_named_and_bad_ones_refused(tmp_path):
    raw = json.loads(_alpaca(ANNOTATORS[1]).read_text())
    raw[3]["preference"] = None
    (tmp_path / "a.json").write_text(json.dumps(raw))
    read = read_comparisons(tmp_path / "a.json")
    assert read.table["judge"].iloc[3] == "missing" and read.report.judge["missing"] == 1
    assert read.report.unreadable == ("a.json record 4: preference is null (the annotator gave none)",)
    raw[5]["preference"] = 3
    (tmp_path / "b.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"b.json record 6: field 'preference': 3.0 is outside \[1, 2\]"):
        read_comparisons(tmp_path / "b.json")


def test_alpaca_eval_refuses_to_combine_annotations_of_other_outputs(tmp_path):
    other = json.loads(_alpaca(ANNOTATORS[1]).read_text())
    other[7]["output_2"] = "a different answer"
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="other.json record 8: no comparison of the first file"):
        read_comparisons([_alpaca(ANNOTATORS[0]), tmp_path / "other.json"])


# ------------------------------------------------------------------ FastChat


def test_fastchat_reads_the_layout_both_orders_and_counts_errors():
    path = FASTCHAT / "model_judgment" / "gpt-4_pair.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    read = read_comparisons(path)
    table, report = read.table, read.report
    names = {"model_1": "A", "model_2": "B", "tie": "tie", "error": "missing"}
    assert len(table) == len(raw) and list(table["judge"]) == [names[r["g1_winner"]] for r in raw]
    assert list(table["judge_swapped"]) == [names[r["g2_winner"]] for r in raw]
    errors = sum(r[g] == "error" for r in raw for g in ("g1_winner", "g2_winner"))
    assert errors and len(report.unreadable) == errors and all("'error'" in u for u in report.unreadable)
    assert table["id"].iloc[0] == f"{raw[0]['question_id']}:phi-3:phi-3-dpo:t1"
    answers = {
        json.loads(line)["question_id"]: json.loads(line)
        for line in (FASTCHAT / "model_answer" / "phi-3.jsonl").read_text().splitlines()
    }
    assert table["response_a"].iloc[0] == answers[int(raw[0]["question_id"])]["choices"][0]["turns"][0]
    assert table["question_type"].notna().all() and table["judge_model"].str.startswith("gpt-4/pair").all()


def test_fastchat_turn_two_carries_both_user_turns_and_each_side_history(tmp_path):
    path = FASTCHAT / "model_judgment" / "gpt-4_pair.jsonl"
    record = json.loads(path.read_text().splitlines()[0]) | {"turn": 2}
    folder = tmp_path / "judgments"
    folder.mkdir()
    (folder / "pair.jsonl").write_text(json.dumps(record) + "\n")
    table = read_comparisons(folder / "pair.jsonl", ReadConfig(answers=str(FASTCHAT))).table
    question = json.loads((FASTCHAT / "question.jsonl").read_text().splitlines()[0])
    assert table["question"].iloc[0] == question["turns"][:2] and len(table["history_a"].iloc[0]) == 1


def test_fastchat_names_the_missing_layout_and_refuses_single_answer_grading(tmp_path):
    lonely = tmp_path / "gpt-4_pair.jsonl"
    shutil.copy(FASTCHAT / "model_judgment" / "gpt-4_pair.jsonl", lonely)
    with pytest.raises(FileNotFoundError, match="question.jsonl.*--answers DIR"):
        read_comparisons(lonely)
    assert len(read_comparisons(lonely, ReadConfig(answers=str(FASTCHAT))).table) == 32
    (tmp_path / "single.jsonl").write_text(
        json.dumps({"question_id": 81, "model": "phi-3", "score": 8, "judge": ["gpt-4", "single-v1"], "turn": 1}) + "\n"
    )
    with pytest.raises(ValueError, match="single-answer grading"):
        read_comparisons(tmp_path / "single.jsonl")


# ------------------------------------------------------------------ Arena


def _arena(tmp_path, rows) -> Path:
    frame = pd.DataFrame(rows, columns=["id", "model_a", "model_b", "prompt", "response_a", "response_b",
                                        "winner_model_a", "winner_model_b", "winner_tie"])  # fmt: skip
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    return path


ARENA_ROWS = [
    [30192, "gpt-4-1106-preview", "gpt-4-0613", json.dumps(["Is it moral?", "Pineapple on pizza?"]),
     json.dumps(["It is complex.", "Yes!"]), json.dumps(["Hard to say.", "No."]), 1, 0, 0],
    [53567, "koala-13b", "gpt-4-0613", json.dumps(["What is the difference between marriage and a license?"]),
     json.dumps(["A license is paperwork."]), json.dumps([None]), 0, 1, 0],
    [65089, "gpt-3.5-turbo-0613", "mistral-medium", json.dumps(["explain function calling"]),
     json.dumps(["Calling a function means ..."]), json.dumps(["Function calling is ..."]), 0, 0, 1],
]  # fmt: skip


def test_arena_tables_read_as_labels_or_as_a_judge(tmp_path):
    path = _arena(tmp_path, ARENA_ROWS)
    read = read_comparisons(path)
    table = read.table
    assert read.report.format == "arena" and list(table["id"]) == ["30192", "53567", "65089"]
    assert list(table["human"]) == ["A", "B", "tie"] and (table["judge"] == "missing").all()
    assert table["question"].iloc[0] == ["Is it moral?", "Pineapple on pizza?"]
    assert table["response_a"].iloc[0] == "Yes!" and table["history_b"].iloc[0] == ["Hard to say."]
    assert table["response_b"].iloc[1] is None  # a null turn is missing text, the row kept
    judged = read_comparisons(path, ReadConfig(read_as="judge")).table
    assert list(judged["judge"]) == ["A", "B", "tie"] and (judged["human"] == "missing").all()


def test_arena_refuses_a_winner_that_is_not_one_hot(tmp_path):
    rows = [list(r) for r in ARENA_ROWS]
    rows[2][6] = 1
    with pytest.raises(ValueError, match="train.csv line 4: fields winner_model_a.*exactly one must be 1, got 1, 0, 1"):
        read_comparisons(_arena(tmp_path, rows))


# ------------------------------------------------------------------ reward-model pairs


def test_reward_pairs_randomise_the_order_by_seed_and_the_label_follows():
    raw = [json.loads(line) for line in PAIRS.read_text().splitlines()]
    read = read_comparisons(PAIRS)
    table = read.table
    assert len(table) == len(raw) == 60 and (table["judge"] == "missing").all()
    chosen_text = np.where(table["human"] == "A", table["response_a"], table["response_b"])
    assert all(r["chosen"].endswith(c) for r, c in zip(raw, chosen_text))
    assert 10 < (table["human"] == "A").sum() < 50  # chosen is not always response_a
    assert [swapped(0, i) for i in table["id"]] == list(table["human"] == "B")
    again = read_comparisons(PAIRS, ReadConfig(order_seed=0)).table
    pd.testing.assert_frame_equal(again, table)
    other = read_comparisons(PAIRS, ReadConfig(order_seed=1)).table
    assert list(other["id"]) == list(table["id"]) and (other["human"] != table["human"]).any()


def test_reward_pairs_with_a_prompt_or_chat_messages(tmp_path):
    messages = lambda answer: [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": answer}]  # noqa: E731
    records = [{"prompt": "Hi?", "chosen": "Hello!", "rejected": "Go away."},
               {"prompt": "Hi?", "chosen": messages("Hey there."), "rejected": messages("...")}]  # fmt: skip
    (tmp_path / "pairs.json").write_text(json.dumps(records))
    table = read_comparisons(tmp_path / "pairs.json").table
    assert list(table["question"]) == ["Hi?", "Hi?"]
    chosen = np.where(table["human"] == "A", table["response_a"], table["response_b"])
    assert list(chosen) == ["Hello!", "Hey there."]


# ------------------------------------------------------------------ any table, through a column mapping


def test_a_benchmark_json_array_reads_through_a_column_mapping(tmp_path):
    records = [{"input": f"q{k}", "output_1": f"a{k}", "output_2": f"b{k}", "label": 1 + k % 2, "gpt4": "model_1"}
               for k in range(4)]  # fmt: skip
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(records))
    plain = read_comparisons(path)  # a benchmark's dataset: the llmbar reader takes it, the labels only
    assert plain.report.format == "llmbar" and (plain.table["judge"] == "missing").all()
    (tmp_path / "near.json").write_text(json.dumps([{"instruction": "q", "output_1": "a", "output_2": "b"}]))
    with pytest.raises(ValueError, match=r"format alpaca_eval needs the field\(s\) preference .*--columns"):
        read_comparisons(tmp_path / "near.json")  # the nearest format says what is missing
    (tmp_path / "other.json").write_text(json.dumps([{"x": 1}]))
    with pytest.raises(ValueError, match="no known format has the fields x .*--columns NAME=FIELD"):
        read_comparisons(tmp_path / "other.json")
    config = ReadConfig(columns=("question=input", "response_a=output_1", "response_b=output_2", "human=label",
                                 "judge=gpt4"))  # fmt: skip
    table = read_comparisons(path, config).table
    assert list(table["human"]) == ["A", "B", "A", "B"] and (table["judge"] == "A").all()
    assert table["id"].str.startswith("row:").all() and table["id"].is_unique
    with pytest.raises(ValueError, match="--columns: .*dataset.json has no field 'prompt'"):
        read_comparisons(path, ReadConfig(columns=("question=prompt",)))


def test_this_packages_table_reads_from_a_json_array_and_back(tmp_path):
    from puaudit_jax.datasets import load_bundled

    table = load_bundled("mtbench").head(20)
    for name in ("t.json", "t.jsonl", "t.csv", "t.parquet", "no_suffix"):
        path = save_comparisons(table, tmp_path / name, format="json" if name == "no_suffix" else None)
        pd.testing.assert_frame_equal(load_comparisons(path)[table.columns[:8]], table[table.columns[:8]])


# ------------------------------------------------------------------ labels from their own file


def test_labels_join_on_ids_and_refuse_what_does_not_join(tmp_path):
    data = _alpaca(ANNOTATORS[1])
    ids = read_comparisons(data).table["id"]
    pd.DataFrame({"id": ids[:5], "human": ["A", "B", "tie", "model_1", ""]}).to_csv(tmp_path / "l.csv", index=False)
    read = read_comparisons(data, ReadConfig(labels=str(tmp_path / "l.csv")))
    assert list(read.table["human"][:5]) == ["A", "B", "tie", "A", "missing"]
    assert read.report.human["missing"] == 76 and "labels: 4 joined" in read.report.notes[-1]
    for rows, message in (([["nope", "A"]], "id 'nope' is not in the data"),
                          ([[ids[0], "A"], [ids[0], "B"]], "labelled more than once"),
                          ([[ids[0], "sideways"]], r"line 2: column 'human': unknown verdict")):  # fmt: skip
        pd.DataFrame(rows, columns=["id", "human"]).to_csv(tmp_path / "bad.csv", index=False)
        with pytest.raises(ValueError, match=message):
            read_comparisons(data, ReadConfig(labels=str(tmp_path / "bad.csv")))


def test_labels_that_contradict_the_data_are_refused(tmp_path):
    table = load_comparisons(PAIRS)
    row = table.iloc[0]
    flipped = {"A": "B", "B": "A"}[row["human"]]
    pd.DataFrame({"id": [row["id"]], "human": [flipped]}).to_csv(tmp_path / "l.csv", index=False)
    with pytest.raises(ValueError, match=f"id '{row['id']}' is labelled '{flipped}' there"):
        read_comparisons(PAIRS, ReadConfig(labels=str(tmp_path / "l.csv")))


def test_an_arena_file_is_a_labels_file_for_a_judges_table(tmp_path):
    arena = _arena(tmp_path, ARENA_ROWS)
    judged = read_comparisons(arena, ReadConfig(read_as="judge")).table.assign(human="missing")
    save_comparisons(judged, tmp_path / "judge.jsonl")
    read = read_comparisons(tmp_path / "judge.jsonl", ReadConfig(labels=str(arena)))
    assert list(read.table["human"]) == ["A", "B", "tie"]


# ------------------------------------------------------------------ the command line


def test_convert_prints_what_was_read_and_writes_a_table_that_reads_back(tmp_path, capsys):
    from puaudit_jax.cli import main

    out = tmp_path / "ae.csv"
    assert main(["convert", *(str(_alpaca(a)) for a in ANNOTATORS), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "read 240 records of 3 file(s) as alpaca_eval: 80 comparisons" in err and "wrote" in err
    back = load_comparisons(out)
    assert len(back) == 80 and {f"other_{a}" for a in ANNOTATORS[1:]} <= set(back.columns)
    pd.testing.assert_frame_equal(
        back[["id", "judge"]], read_comparisons([_alpaca(a) for a in ANNOTATORS]).table[["id", "judge"]]
    )


def test_quantify_reads_a_format_with_labels_from_their_own_file(tmp_path, capsys):
    from puaudit_jax.cli import main

    reference = read_comparisons(_alpaca(ANNOTATORS[0])).table  # the weighted judge as the reference labeller
    chosen = np.random.default_rng(0).choice(len(reference), 40, replace=False)
    reference.iloc[chosen][["id", "judge"]].rename(columns={"judge": "human"}).to_csv(tmp_path / "l.csv", index=False)
    argv = ["quantify", str(_alpaca(ANNOTATORS[1])), "--labels", str(tmp_path / "l.csv"), "--out", str(tmp_path / "q"),
            "--no-figures", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    frame = pd.read_csv(tmp_path / "q" / "leaderboard.csv")
    row = frame[(frame["target"] == "win rate: gpt-3.5-turbo-0301") & (frame["estimator"] == "ppi++")].iloc[0]
    truth = (reference["judge"] == "B").mean() + 0.5 * (reference["judge"] == "tie").mean()
    assert row["n_labelled"] == 40 and row["lower"] <= truth <= row["upper"]


def test_consensus_scores_read_every_judge_of_a_format(tmp_path):
    from puaudit_jax.consensus.runs import load_verdicts

    verdicts = load_verdicts(str(_alpaca(ANNOTATORS[0])))  # judge_model names the first; other_* the others
    assert set(verdicts["judge"]) == {"weighted_alpaca_eval_gpt4_turbo"}
    out = tmp_path / "all.jsonl"
    save_comparisons(read_comparisons([_alpaca(a) for a in ANNOTATORS]).table, out)
    verdicts = load_verdicts(str(out))
    assert set(verdicts["judge"]) == set(ANNOTATORS) and len(verdicts) == 3 * 80


# ------------------------------------------------------------------ LLMBar-style benchmark files

LLMBAR = data_path("formats", "llmbar", "Natural")
EVALUATORS = (LLMBAR / "evaluators" / "GPT-4" / "Vanilla_NoRules" / "result.json",
              LLMBAR / "evaluators" / "ChatGPT-0301" / "Vanilla_NoRules" / "result.json")  # fmt: skip


def _winners(path: Path) -> list[tuple[str, str]]:
    import ast

    records = json.loads(path.read_text())
    runs = [(r["results"] if isinstance(r["results"], list) else ast.literal_eval(r["results"]))[-1] for r in records]
    names = {"1": "A", "2": "B"}
    verdict = lambda run, key: names.get(str(run[key]["winner"]), "missing")  # noqa: E731
    return [(verdict(r, "swap = False"), verdict(r, "swap = True")) for r in runs]


def test_llmbar_results_give_the_judge_in_both_orders_the_gold_label_and_other_evaluators():
    read = read_comparisons(list(EVALUATORS))
    table = read.table
    raw = json.loads(EVALUATORS[0].read_text())
    assert read.report.format == "llmbar" and len(table) == len(raw) == 40
    assert list(zip(table["judge"], table["judge_swapped"])) == _winners(EVALUATORS[0])
    assert list(table["human"]) == [{1: "A", 2: "B"}[r["label"]] for r in raw]
    assert list(table["other_chatgpt_0301_vanilla_norules"]) == [w for w, _ in _winners(EVALUATORS[1])]
    assert set(table["judge_model"]) == {"GPT-4/Vanilla_NoRules"}
    dataset = read_comparisons(LLMBAR / "dataset.json").table  # the gold labels alone, the same ids
    assert list(dataset["id"]) == list(table["id"]) and (dataset["judge"] == "missing").all()


# ------------------------------------------------------------------ what a new user got wrong, answered in one line


def test_a_labels_file_without_a_human_column_is_named(tmp_path):
    ids = read_comparisons(_alpaca(ANNOTATORS[1])).table["id"]
    pd.DataFrame({"id": ids[:3], "label": ["A", "B", "A"]}).to_csv(tmp_path / "l.csv", index=False)
    with pytest.raises(ValueError, match=r"l.csv: a labels file needs the columns id and human .* it has id, label"):
        read_comparisons(_alpaca(ANNOTATORS[1]), ReadConfig(labels=str(tmp_path / "l.csv")))


def test_several_labels_files_join_in_turn(tmp_path):
    ids = read_comparisons(_alpaca(ANNOTATORS[1])).table["id"]
    pd.DataFrame({"id": ids[:3], "human": ["A", "B", "A"]}).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame({"id": ids[3:5], "human": ["tie", "B"]}).to_csv(tmp_path / "b.csv", index=False)
    both = f"{tmp_path / 'a.csv'},{tmp_path / 'b.csv'}"
    read = read_comparisons(_alpaca(ANNOTATORS[1]), ReadConfig(labels=both))
    assert list(read.table["human"][:6]) == ["A", "B", "A", "tie", "B", "missing"]
    assert sum("joined" in n for n in read.report.notes) == 2


def test_windows_line_ends_give_the_same_ids(tmp_path):
    rows = pd.DataFrame({"question": ["two\nlines", "q"], "response_a": ["a\nb", "x"], "response_b": ["c", "y"],
                         "judge": ["A", "B"]})  # fmt: skip
    rows.to_csv(tmp_path / "unix.csv", index=False, lineterminator="\n")
    rows.to_csv(tmp_path / "dos.csv", index=False, lineterminator="\r\n")
    unix, dos = (read_comparisons(tmp_path / f).table for f in ("unix.csv", "dos.csv"))
    assert list(unix["id"]) == list(dos["id"])


def test_a_misspelt_column_name_a_json_object_and_a_file_given_twice_are_named(tmp_path):
    path = LLMBAR / "dataset.json"
    with pytest.raises(ValueError, match="unknown name 'qestion' \\(did you mean 'question'\\?\\)"):
        read_comparisons(path, ReadConfig(columns="qestion=input,response_a=output_1"))
    (tmp_path / "obj.json").write_text(json.dumps({"annotations": [{"x": 1}], "v": 2}, indent=2))
    with pytest.raises(ValueError, match="obj.json: one JSON object \\(keys: annotations, v\\).*under 'annotations'"):
        read_comparisons(tmp_path / "obj.json")
    with pytest.raises(ValueError, match="given twice"):
        read_comparisons([_alpaca(ANNOTATORS[0]), _alpaca(ANNOTATORS[0])])


def test_a_table_mapped_without_its_question_names_the_question_and_columns():
    from puaudit_jax.datasets import ComparisonValidationError

    config = ReadConfig(columns=("response_a=output_1", "response_b=output_2", "human=label"))
    with pytest.raises(ComparisonValidationError) as error:
        read_comparisons(LLMBAR / "dataset.json", config)
    text = str(error.value)
    assert "column 'question': required column is missing" in text and "--columns NAME=FIELD" in text
    assert "column 'id'" not in text


def test_options_of_another_format_are_refused_not_ignored():
    with pytest.raises(ValueError, match="--answers applies to fastchat files only; these were read as alpaca_eval"):
        read_comparisons(_alpaca(ANNOTATORS[0]), ReadConfig(answers="somewhere"))
    with pytest.raises(ValueError, match="--order-seed applies to reward_pairs files only"):
        read_comparisons(_alpaca(ANNOTATORS[0]), {"order_seed": 3})  # a mapping of settings works too


def test_consensus_names_a_fastchat_judge_by_its_model(tmp_path):
    from puaudit_jax.consensus.matrices import table_verdicts

    table = read_comparisons(FASTCHAT / "model_judgment" / "gpt-4_pair.jsonl").table
    assert set(table["judge_model"]) > {"gpt-4/pair-v2"} and set(table_verdicts(table)["judge"]) == {"gpt-4"}


def test_audit_of_a_fully_labelled_file_stops_before_embedding(tmp_path, monkeypatch, capsys):
    from puaudit_jax.cli import CommandError, inputs, main

    def never(*args, **kwargs):
        raise AssertionError("embedded")

    monkeypatch.setattr(inputs, "features", never)
    with pytest.raises(CommandError):
        main(["audit", str(EVALUATORS[0]), "--out", str(tmp_path / "a"), "--quiet"])
    err = capsys.readouterr().err
    assert "every row is labelled" in err and "--hide-labels F" in err and "--include-unlabelled" not in err


def test_include_unlabelled_on_a_file_is_refused_not_ignored(tmp_path, capsys):
    from puaudit_jax.cli import CommandError, main

    with pytest.raises(CommandError):
        main(["convert", str(_alpaca(ANNOTATORS[0])), "--include-unlabelled", "--out", str(tmp_path / "t.csv")])
    assert "--include-unlabelled applies to the bundled sets only" in capsys.readouterr().err


def test_the_light_configs_table_names_are_the_tables_columns():
    from puaudit_jax.datasets.comparisons import CORE_COLUMNS, EVIDENCE_COLUMNS, HISTORY_COLUMNS, MODEL_COLUMNS
    from puaudit_jax.datasets.read_config import TABLE_NAMES

    assert set(TABLE_NAMES) == {*CORE_COLUMNS, *MODEL_COLUMNS, *HISTORY_COLUMNS, *EVIDENCE_COLUMNS}
