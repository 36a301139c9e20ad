"""`puaudit judge` records both orders (judge_swapped) and the round trip into `puaudit audit`; the
JudgeBench loader on a hand-made slice in its authors' output format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit.embed import PairEmbeddings, save_embeddings
from puaudit_jax.datasets import load_comparisons, save_comparisons
from tests.judges.chat_stub import chat_server, judge_blocks


@pytest.fixture()
def first_position_server():
    """An OpenAI-compatible stub: prefers the response that says GOOD, else the one shown first."""
    calls = []

    def reply(user: str) -> str:
        a_block, b_block = judge_blocks(user)
        calls.append("[[B]]" if "GOOD" in b_block and "GOOD" not in a_block else "[[A]]")
        return f"ok\n{calls[-1]}"

    with chat_server(reply) as url:
        yield url, calls


def _pairs(n: int, n_labelled: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        good = i % 3  # 0: GOOD in a, 1: GOOD in b, 2: neither (the stub then picks the first shown)
        a = f"answer a{i}" + (" GOOD" if good == 0 else "")
        b = f"answer b{i}" + (" GOOD" if good == 1 else "")
        human = ("A", "B", rng.choice(["A", "B"]))[good]
        rows.append(dict(id=str(i), question=f"q{i}", response_a=a, response_b=b, judge="A",
                         human=human if i < n_labelled else "missing", question_type="t"))  # fmt: skip
    return pd.DataFrame(rows)


def test_judge_writes_both_orders_and_the_audit_reads_them(tmp_path, first_position_server):
    from puaudit_jax.cli import main

    url, calls = first_position_server
    table = _pairs(60, 45)
    save_comparisons(table, tmp_path / "pairs.csv")
    common = ["--judge", "openai", "--base-url", url, "--model", "stub", "--quiet", "--cache-dir", str(tmp_path / "c")]
    assert main(["judge", str(tmp_path / "pairs.csv"), "--out", str(tmp_path / "j"), *common]) == 0
    assert len(calls) == 120  # both orders: twice the calls
    judged = load_comparisons(tmp_path / "j" / "comparisons.csv")
    good = np.arange(60) % 3
    assert (judged.judge == np.where(good == 1, "B", "A")).all()
    # GOOD in one response: the same verdict in both orders; neither: the first shown wins both times
    np.testing.assert_array_equal(judged.judge_swapped, np.where(good == 0, "A", "B"))
    assert judged.judge_confidence.isna().all()  # a text judge states no confidence

    rng = np.random.default_rng(1)
    emb = PairEmbeddings(judged["id"].to_numpy(str), rng.normal(size=(60, 8)), rng.normal(size=(60, 8)))
    save_embeddings(emb, tmp_path / "emb.npz")
    out = tmp_path / "audit"
    argv = ["audit", str(tmp_path / "j" / "comparisons.csv"), "--embeddings", str(tmp_path / "emb.npz"),
            "--rule", "evidence", "--out", str(out), "--quiet", "--no-figures"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    used = report["decision"]["judge_evidence"]
    assert used["rows"]["swapped"] == 60 and "swapped:agrees" in used["features"]
    assert used["skipped"]["confidence"] == "the same value on every row" or "confidence" not in used["rows"]

    calls.clear()
    assert main(["judge", str(tmp_path / "pairs.csv"), "--out", str(tmp_path / "j1"), "--single-order", *common]) == 0
    once = load_comparisons(tmp_path / "j1" / "comparisons.csv")
    assert (once.judge_swapped == "missing").all()


def test_audit_options_for_evidence_are_checked_first(tmp_path, capsys):
    from puaudit_jax.cli import CommandError, main

    save_comparisons(_pairs(30, 20), tmp_path / "pairs.csv")
    with pytest.raises(CommandError):
        main(["audit", str(tmp_path / "pairs.csv"), "--other-judges", "gpt4", "--out", str(tmp_path / "o")])
    assert "column 'gpt4': no such column" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: an unknown kind of evidence
        main(["audit", str(tmp_path / "pairs.csv"), "--evidence", "style,vibes", "--out", str(tmp_path / "o")])
    assert "unknown ['vibes']" in capsys.readouterr().err


def _write_outputs(folder, pairs, judge_model, judgments):
    name = f"dataset=judgebench,response_model=gpt-4o-2024-05-13,judge_name=x,judge_model={judge_model}.jsonl"
    with open(folder / name, "w") as f:
        for pair, js in zip(pairs, judgments):
            f.write(json.dumps({"pair_id": pair, "label": "A>B", "judgments": js}) + "\n")


def test_judgebench_loader_reads_both_orders_strength_and_other_judges(tmp_path):
    from puaudit_jax.datasets import load_judgebench, load_judgebench_pairs

    pairs = load_judgebench_pairs("gpt")
    assert len(pairs) == 350 and set(pairs.human) == {"A", "B"} and len(load_judgebench_pairs("claude")) == 270
    assert set(pairs.question_type) == {"knowledge", "reasoning", "math", "coding"}
    ids = pairs["id"].tolist()[:3]

    def arena(first, second, strength):
        return [
            {"judgment": {"response": f"verdict [[{strength}]]"}, "decision": first},
            {"judgment": {}, "decision": second},
        ]

    judgments = [arena("A>B", "B>A", "A>>B"), arena("A>B", "A>B", "A>B"), str(arena("A=B", None, "A=B"))]
    _write_outputs(tmp_path, ids, "o1-mini-2024-09-12", judgments)  # the third as the authors' str(list)
    rm = [[{"judgment": {"scores": [2.0, 1.0]}, "decision": "A>B"}]] * 2  # a reward model: one order, scores
    _write_outputs(tmp_path, ids[:2], "Some_Reward-7B", rm)
    table = load_judgebench("gpt", outputs=tmp_path)
    head = table.set_index("id").loc[ids]
    assert head.judge.tolist() == ["A", "A", "tie"]
    assert head.judge_swapped.tolist() == ["A", "B", "missing"]  # the swapped order's B>A is the original A
    assert head.judge_confidence.tolist() == [1.0, 0.5, 0.0]
    assert head.other_some_reward_7b.tolist() == ["A", "A", "missing"]
    rest = table.set_index("id").drop(index=ids)
    assert (rest.judge_status == "no verdict in the source").all() and (rest.judge == "missing").all()
    with pytest.raises(ValueError, match="no JudgeBench file of judge"):
        load_judgebench("gpt", outputs=tmp_path, judge="gpt-5")
    with pytest.raises(FileNotFoundError):
        load_judgebench("gpt", outputs=tmp_path / "nowhere")
