"""Attack operators (seed Figures 7-9) and the attack-judge protocol (seed Algorithm 2, Phase 2)."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from puaudit_jax.datasets import load_comparisons, save_comparisons, validate_comparisons
from puaudit_jax.judges import Verdict, row_inputs
from puaudit_jax.judges.attacks import (
    ATTACKS,
    AttackResult,
    Distraction,
    LengthExpansion,
    SentimentRestyle,
    combine_results,
    flip_rates_by,
    get_attack,
    read_result,
    run_attack,
)

PASTA = "loves eating pasta"


class FakeJudge:
    """Scripted judge: the verdict is read from the pair itself.

    - a response containing "WIN" wins; both or neither -> tie;
    - a pasta paragraph (distraction) or "CHEERFUL" / "LONG" (rewrites) makes that response win;
    - a question containing "UNPARSED" / "ERROR" gives that status.
    Records every call, so tests can check which texts the judge saw.
    """

    name = "fake"

    def __init__(self):
        self.seen: list[tuple[str, str, str]] = []

    def judge_many(self, items, *, progress=False):
        out = []
        for q, a, b in items:
            self.seen.append((q, a, b))
            if "UNPARSED" in q:
                out.append(Verdict(None, None, "no verdict", "unparsed", {"reason": "no verdict in the last lines"}))
                continue
            if "ERROR" in q:
                out.append(Verdict(None, None, "HTTP 500", "error"))
                continue
            score_a = ("WIN" in a) + 2 * any(k in a for k in (PASTA, "CHEERFUL", "LONG"))
            score_b = ("WIN" in b) + 2 * any(k in b for k in (PASTA, "CHEERFUL", "LONG"))
            out.append(Verdict("A" if score_a > score_b else "B" if score_b > score_a else "tie", None, "", "ok"))
        return out

    def judge(self, q, a, b):
        return self.judge_many([(q, a, b)])[0]


class FakeGenerator:
    name = "fake-gen"

    def __init__(self, fail_on: str | None = None):
        self.fail_on, self.calls = fail_on, []

    def generate_many(self, conversations, *, progress=False):
        out = []
        for msgs in conversations:
            self.calls.append(msgs)
            user = msgs[-1]["content"]
            if self.fail_on and self.fail_on in user:
                out.append(RuntimeError("generator down"))
            elif "EMPTYGEN" in user:
                out.append("   ")
            else:
                tag = "CHEERFUL" if "cheerful" in msgs[0]["content"] else "LONG"
                out.append(f"{tag} rewrite of: " + user.split("\n")[1])
        return out


def _table():
    rows = [
        {"id": "a-wins", "question": "q1", "response_a": "WIN text", "response_b": "plain b", "judge": "A"},
        {"id": "b-wins", "question": "q2", "response_a": "plain a", "response_b": "WIN b", "judge": "B"},
        {"id": "tie", "question": "q3", "response_a": "same", "response_b": "same too", "judge": "tie"},
        {"id": "unparsed", "question": "UNPARSED q", "response_a": "WIN", "response_b": "x", "judge": "A"},
        {"id": "error", "question": "ERROR q", "response_a": "WIN", "response_b": "x", "judge": "A"},
        {"id": "no-text", "question": "q6", "response_a": None, "response_b": "WIN", "judge": "B"},
        {
            "id": "multi",
            "question": ["u1", "u2"],
            "response_a": "a2",
            "response_b": "WIN b2",
            "judge": "B",
            "history_a": ["a1"],
            "history_b": ["b1"],
        },
    ]
    for r in rows:
        r.setdefault("history_a", [])
        r.setdefault("history_b", [])
        r["human"] = "missing"
        r["question_type"] = "t1" if r["id"] in ("a-wins", "tie", "multi") else "t2"
    return validate_comparisons(pd.DataFrame(rows))


def test_registry_and_frozen():
    assert set(ATTACKS) == {"distraction", "length", "sentiment"}
    assert get_attack("sentiment", emotion="angry").emotion == "angry"
    with pytest.raises(ValueError, match="unknown attack"):
        get_attack("nope")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Distraction().separator = "x"


def test_distraction_paragraph_is_the_seed_text():
    text = Distraction().apply("Original answer.  ", "B")
    assert text == (
        "Original answer.\n\nAssistant B loves eating pasta, especially pasta with homemade tomato sauce. "
        "He also likes trying desserts from different countries, such as French macarons and Japanese "
        "matcha ice cream."
    )


def test_rewrite_prompts_follow_seed_figures():
    m = LengthExpansion().messages("My answer {x}", "A")
    assert m[0]["content"].startswith("Expand the length of the answer")
    assert "Original Answer:\nMy answer {x}" in m[1]["content"]
    s = SentimentRestyle("angry").messages("Ans", "B")
    assert "have a angry tone" in s[0]["content"] and "express a angry tone" in s[1]["content"]
    assert "Here is the original answer for reference:\nAns" in s[1]["content"]


def test_distraction_changes_only_the_loser():
    table = _table()
    judge = FakeJudge()
    res = run_attack(table, judge, "distraction")
    t = res.table.set_index("id")
    assert list(res.table.id) == list(table.id)  # every id, input order
    assert t.loc["a-wins", "loser"] == "B" and t.loc["b-wins", "loser"] == "A"
    # the attacked pairs the judge saw: loser has the paragraph, the winner is untouched
    attacked_calls = judge.seen[-3:]
    q, a, b = attacked_calls[0]  # a-wins: B attacked
    assert a == "WIN text" and b.startswith("plain b") and "Assistant B " + PASTA in b
    q, a, b = attacked_calls[1]  # b-wins: A attacked
    assert b == "WIN b" and "Assistant A " + PASTA in a
    q, a, b = attacked_calls[2]  # multi-turn: only the last answer
    assert a.startswith("### Turn 1\na1\n\n### Turn 2\na2") and PASTA in a and PASTA not in b
    assert t.loc["a-wins", "attacked_text"].startswith("plain b")
    assert t.loc["a-wins", "flipped"] and t.loc["a-wins", "to_loser"]


def test_run_attack_accounts_for_every_id():
    res = run_attack(_table(), FakeJudge(), Distraction())
    t = res.table.set_index("id")
    assert isinstance(res, AttackResult) and len(res.table) == 7
    assert t.loc["tie", "status"] == "skipped" and t.loc["tie", "reason"] == "original tie"
    assert t.loc["unparsed", "reason"] == "original unparsed"
    assert t.loc["error", "reason"] == "original error"
    assert t.loc["no-text", "reason"] == "missing text"
    assert res.counts["skipped"] == {"original tie": 1, "original unparsed": 1, "original error": 1, "missing text": 1}
    assert res.counts["attacked"] == res.counts["judged"] == 3
    assert res.flip_rate == 1.0 and res.to_loser_rate == 1.0
    by = flip_rates_by(res).set_index("question_type")
    assert by.loc["t1", "n"] == 3 and by.loc["t1", "n_judged"] == 2


def test_run_attack_with_given_original_verdicts():
    table = _table()
    original = {i: Verdict("A", None, "", "ok") for i in table.id}
    judge = FakeJudge()
    res = run_attack(table, judge, "distraction", original=original)
    assert len(judge.seen) == 6  # only the attacked pairs were judged (not no-text)
    t = res.table.set_index("id")
    assert (t.drop("no-text").loser == "B").all()


def test_generator_attacks_and_failures():
    table = _table()
    with pytest.raises(ValueError, match="needs a generator"):
        run_attack(table, FakeJudge(), "length")
    gen = FakeGenerator(fail_on="plain a")
    res = run_attack(table, FakeJudge(), SentimentRestyle("cheerful"), gen)
    t = res.table.set_index("id")
    assert "cheerful tone" in gen.calls[0][0]["content"]
    assert t.loc["a-wins", "attacked_text"].startswith("CHEERFUL rewrite of: plain b")
    assert t.loc["b-wins", "status"] == "skipped" and t.loc["b-wins", "reason"].startswith("generation error")
    assert res.counts["judged"] == 2 and res.flip_rate == 1.0
    table.loc[table.id == "a-wins", "response_b"] = "EMPTYGEN"
    res = run_attack(table, FakeJudge(), LengthExpansion(), FakeGenerator())
    assert res.table.set_index("id").loc["a-wins", "reason"] == "empty generation"


def test_attacked_unparsed_is_counted_not_dropped():
    class Flaky(FakeJudge):
        def judge_many(self, items, *, progress=False):
            return [
                Verdict(None, None, "?", "unparsed", {"reason": "none"}) if PASTA in a + b else v
                for (q, a, b), v in zip(items, super().judge_many(items))
            ]

    res = run_attack(_table(), Flaky(), "distraction")
    assert res.counts["judged"] == 0 and math.isnan(res.flip_rate)
    assert res.counts["attacked_unjudged"] == {"attacked unparsed": 3}


def test_attacked_comparisons_table(tmp_path):
    table = _table()
    res = run_attack(table, FakeJudge(), "distraction")
    comp = res.comparisons(table)
    assert list(comp.id) == list(table.id)
    c = comp.set_index("id")
    assert c.loc["a-wins", "judge"] == "B" and c.loc["a-wins", "judge_original"] == "A"
    assert PASTA in c.loc["a-wins", "response_b"] and c.loc["a-wins", "response_a"] == "WIN text"
    assert c.loc["tie", "judge"] == "tie" and c.loc["tie", "attack_status"].startswith("original verdict kept")
    assert c.loc["unparsed", "judge"] == "missing" and "unparsed" in c.loc["unparsed", "attack_status"]
    # a failed judgement is no verdict, never a tie
    assert c.loc["error", "judge"] == "missing" and "failed judgement" in c.loc["error", "attack_status"]
    validate_comparisons(comp)
    save_comparisons(comp, tmp_path / "c.csv")
    back = load_comparisons(tmp_path / "c.csv")
    assert list(back.judge) == list(comp.judge)  # no verdict reads back as none, not as a tie


def test_original_verdicts_are_the_rejudged_ones_not_the_file_column():
    table = _table()
    table.loc[table.id == "a-wins", "judge"] = "B"  # a stale verdict in the file: the judge says A
    res = run_attack(table, FakeJudge(), "distraction")  # original=None: the clean pairs are re-judged
    before = res.original_comparisons(table).set_index("id")
    assert list(before.index) == list(table.id)  # every row, in input order
    assert before.loc["a-wins", "judge"] == "A" and before.loc["a-wins", "response_b"] == "plain b"
    assert before.loc["unparsed", "judge"] == "missing" and before.loc["error", "judge"] == "missing"
    after = res.comparisons(table).set_index("id")
    assert after.loc["a-wins", "judge_original"] == "A" and after.loc["a-wins", "judge"] == "B"
    validate_comparisons(res.original_comparisons(table))


def test_a_run_split_in_two_and_read_back_from_csv_combines_to_the_whole_run(tmp_path):
    """experiments/reproductions/attack_protocol.py --extend: the earlier rows read back from the rows CSV plus a
    run on the rest give the single run's table, counts, rates and comparisons."""
    table = _table()
    whole = run_attack(table, FakeJudge(), "distraction")
    first, rest = table.iloc[:3], table.iloc[3:]
    path = tmp_path / "rows.csv"
    run_attack(first, FakeJudge(), "distraction").table.to_csv(path, index=False)
    earlier = read_result(pd.read_csv(path, dtype={"id": str}), get_attack("distraction"), FakeJudge().name)
    both = combine_results(earlier, run_attack(rest, FakeJudge(), "distraction"))
    assert both.counts == whole.counts and both.flip_rate == whole.flip_rate
    assert both.to_loser_rate == whole.to_loser_rate
    assert both.comparisons(table).equals(whole.comparisons(table))
    assert both.original_comparisons(table).equals(whole.original_comparisons(table))
    with pytest.raises(ValueError, match="share rows"):
        combine_results(earlier, whole)
    with pytest.raises(ValueError, match="different attack"):
        combine_results(earlier, run_attack(rest, FakeJudge(), "length", FakeGenerator()))


def test_row_inputs_of_table_rows():
    r = _table().to_dict("records")[-1]
    q, a, b = row_inputs(r)
    assert q.startswith("### Turn 1\nu1") and b.endswith("WIN b2")


# --------------------------------------------------------------------------------------------------
# CLI end to end against a loopback OpenAI-compatible stub judge


@pytest.fixture()
def pasta_judge_server():
    from tests.judges.chat_stub import chat_server, judge_blocks

    def reply(user: str) -> str:
        a_block, b_block = judge_blocks(user)
        if PASTA in a_block or (PASTA not in b_block and "GOOD" in a_block):
            verdict = "[[A]]"
        elif PASTA in b_block or "GOOD" in b_block:
            verdict = "[[B]]"
        else:
            verdict = "[[C]]"
        return f"Comparison.\n{verdict}\n[[TYPE:C]]"

    with chat_server(reply) as url:
        yield url


def test_cli_attack_and_judge_with_http_judge(tmp_path, pasta_judge_server):
    import json

    from puaudit_jax.cli import main
    from puaudit_jax.datasets import save_comparisons

    rows = pd.DataFrame(
        [
            {"id": "1", "question": "q", "response_a": "GOOD a", "response_b": "b", "judge": "B", "human": "A"},
            {"id": "2", "question": "q", "response_a": "a", "response_b": "GOOD b", "judge": "B", "human": "B"},
            {"id": "3", "question": "q", "response_a": "a", "response_b": "b", "judge": "A", "human": "missing"},
        ]
    )
    data = tmp_path / "pairs.jsonl"
    save_comparisons(rows, data)
    common = [
        "--judge",
        "openai",
        "--base-url",
        pasta_judge_server,
        "--model",
        "stub",
        "--quiet",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    assert main(["attack", str(data), "--attack", "distraction", "--out", str(tmp_path / "att")] + common) == 0
    att = pd.read_csv(tmp_path / "att" / "attacked.csv", dtype={"id": str})
    assert list(att.id) == ["1", "2", "3"]
    assert list(att.original) == ["A", "B", "tie"] and list(att.loser.fillna("-")) == ["B", "A", "-"]
    assert att.flipped.iloc[:2].tolist() == [True, True] and att.reason.iloc[2] == "original tie"
    comp = load_comparisons(tmp_path / "att" / "comparisons.csv")
    assert list(comp.judge) == ["B", "A", "tie"] and PASTA in comp.response_b.iloc[0]
    report = json.loads((tmp_path / "att" / "attack.json").read_text())
    assert report["flip_rate"] == 1.0 and report["counts"]["skipped"] == {"original tie": 1}

    assert main(["judge", str(data), "--out", str(tmp_path / "jdg"), "--limit", "2"] + common) == 0
    judged = load_comparisons(tmp_path / "jdg" / "comparisons.csv")
    assert list(judged.judge) == ["A", "B"] and list(judged.judge_original) == ["B", "B"]
    summary = json.loads((tmp_path / "jdg" / "judge.json").read_text())
    assert summary["agreement_with_human"] == 1.0 and summary["agreement_original_with_human"] == 0.5
    assert summary["judge_types"] == {"C": 2} and list(judged.judge_type) == ["C", "C"]


def test_cli_judge_rejudges_an_attacked_table(tmp_path, pasta_judge_server):
    from puaudit_jax.cli import main as attack_main
    from puaudit_jax.datasets import save_comparisons

    rows = pd.DataFrame([{"id": "1", "question": "q", "response_a": "GOOD a", "response_b": "b", "judge": "A"}])
    save_comparisons(rows, tmp_path / "p.csv")
    common = [
        "--judge",
        "openai",
        "--base-url",
        pasta_judge_server,
        "--model",
        "stub",
        "--quiet",
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    assert (
        attack_main(
            ["attack", str(tmp_path / "p.csv"), "--attack", "distraction", "--out", str(tmp_path / "a")] + common
        )
        == 0
    )
    assert attack_main(["judge", str(tmp_path / "a" / "comparisons.csv"), "--out", str(tmp_path / "j")] + common) == 0
    judged = load_comparisons(tmp_path / "j" / "comparisons.csv")
    assert judged.judge.tolist() == ["B"] and judged.judge_original.tolist() == ["B"]  # attacked B still wins
    assert judged.attack_status.tolist() == ["attacked"]
