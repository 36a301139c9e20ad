"""MT-Bench: GPT-4 pairwise verdicts vs expert votes, as a comparison table.

Source files (``puaudit_jax/data/mtbench``, provenance in its README): ``question.jsonl`` (80
questions, 2 user turns each, a category), ``model_answer/<model>.jsonl`` (answer texts),
``gpt4_pair_partial.jsonl`` (1,240 GPT-4 verdicts) and ``human_votes_partial.jsonl`` (1,751 expert /
author votes).

**How a row is built**

- One row per GPT-4 verdict, i.e. per (question_id, model_a, model_b, turn), in file order.
  id = ``"mtbench:<question_id>:<model_a>:<model_b>:t<turn>"``.
- judge: the GPT-4 verdict; ``"tie (inconsistent)"`` (GPT-4 changed its mind when the order was
  swapped) -> ``"tie"``. The raw string is kept in ``judge_raw``.
- human: the votes sharing the key, aggregated by :func:`puaudit_jax.datasets.votes.aggregate_votes`
  (default plurality; a split such as one A and one B vote -> ``"tie"`` with ``human_split`` True).
  Counts in ``n_votes``, ``votes_a``, ``votes_b``, ``votes_tie``; voter names in ``voters``
  (comma-separated; None when unlabelled) and their votes, in the same order, in ``votes`` ("A,tie";
  Krippendorff's alpha reads them: :mod:`puaudit_jax.quantify.raters`). GPT-4 verdicts without any
  vote (8 in the bundled files, all turn 2) are kept with human = ``"missing"`` (unlabelled) unless
  ``include_unlabelled=False``.
- Identical responses and empty answers are kept (excluded later by ``item_status``): 9 pairs have
  identical judged texts, and llama-13b's turn-1 answer to question 127 is empty. "Identical" looks
  at the judged texts only; on turn 2 the two histories may still differ.
- question_type: the question's category (writing, roleplay, reasoning, math, coding, extraction,
  stem, humanities).
- Turn 1: question = the first user message (str); response_a / response_b = each model's first
  answer; ``history_a`` = ``history_b`` = [].
- Turn 2: GPT-4 judged the second answers *in the context of each model's own first answer*.
  question = [user turn 1, user turn 2] (the part both sides share); response_a / response_b = the
  second answers (what was judged); ``history_a`` / ``history_b`` = [that model's first answer].
  So the response fields hold exactly the compared text, and
  :func:`puaudit_jax.datasets.comparisons.conversation` rebuilds each side's full two-turn chat.
- Extra columns: question_id, model_a, model_b, judge_raw, vote counts, human_split, voters, votes,
  history_a, history_b.
- An answer missing from ``model_answer`` (vicuna-13b-v1.2 has none for question 144; no verdict
  involves it) would give response None -> excluded later as missing text, never dropped here.

Every vote must belong to a GPT-4 verdict (the data model needs a judge verdict); a vote without one
raises ``ValueError`` rather than being dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .comparisons import validate_comparisons
from .paths import data_path
from .verdicts import MISSING, normalize_verdict
from .votes import aggregate_votes

KEY = ["question_id", "model_a", "model_b", "turn"]


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_answers(folder: Path) -> dict[tuple[int, str], list[str]]:
    """(question_id, model) -> the model's answer turns, from ``model_answer/<model>.jsonl``."""
    answers: dict[tuple[int, str], list[str]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for record in _read_jsonl(path):
            if record.get("model_id", path.stem) != path.stem:
                raise ValueError(f"{path}: model_id {record['model_id']!r} does not match the file name")
            answers[(int(record["question_id"]), path.stem)] = list(record["choices"][0]["turns"])
    return answers


def _comparison_row(record: dict, questions: dict, answers: dict) -> dict:
    """One comparison of the package's data model from a GPT-4 verdict ``record`` (with its votes).

    Turn 1 asks the question; turn 2 carries both user turns and each side's own first answer.
    """
    qid, turn = int(record["question_id"]), int(record["turn"])
    question = questions[qid]
    user_turns = list(question["turns"][:turn])
    side = {}
    for s, model in (("a", record["model_a"]), ("b", record["model_b"])):
        turns = answers.get((qid, model))
        side[f"response_{s}"] = turns[turn - 1] if turns is not None and len(turns) >= turn else None
        side[f"history_{s}"] = list(turns[: turn - 1]) if turns is not None else None
    return {
        "id": f"mtbench:{qid}:{record['model_a']}:{record['model_b']}:t{turn}",
        "question": user_turns[0] if turn == 1 else user_turns,
        "response_a": side["response_a"],
        "response_b": side["response_b"],
        "judge": normalize_verdict(record["judge_raw"], allow_missing=False),
        "human": record["human"],
        "question_type": question["category"],
        "turn": turn,
        "question_id": qid,
        "model_a": record["model_a"],
        "model_b": record["model_b"],
        "judge_raw": record["judge_raw"],
        **{c: record[c] for c in ("n_votes", "votes_a", "votes_b", "votes_tie", "human_split", "voters", "votes")},
        "history_a": side["history_a"],
        "history_b": side["history_b"],
    }


def load_mtbench(*, include_unlabelled: bool = True, vote_rule: str = "plurality") -> pd.DataFrame:
    """The MT-Bench comparison table (GPT-4 judge vs expert votes); see the module docstring."""
    folder = data_path("mtbench")
    questions = {int(q["question_id"]): q for q in _read_jsonl(folder / "question.jsonl")}
    answers = load_answers(folder / "model_answer")
    verdicts = pd.DataFrame(_read_jsonl(folder / "gpt4_pair_partial.jsonl"))
    votes = pd.DataFrame(_read_jsonl(folder / "human_votes_partial.jsonl"))

    duplicated = verdicts.duplicated(KEY)
    if duplicated.any():
        raise ValueError(f"gpt4_pair_partial.jsonl: {int(duplicated.sum())} repeated (question, pair, turn) keys")
    votes["vote"] = [normalize_verdict(w, allow_missing=False) for w in votes["winner"]]
    human = aggregate_votes(votes, KEY, rule=vote_rule)
    voters = votes.groupby(KEY).agg(voters=("judge", ",".join), votes=("vote", ",".join)).reset_index()
    human = human.merge(voters, on=KEY, how="left", validate="one_to_one")

    orphans = human[KEY].merge(verdicts[KEY], on=KEY, how="left", indicator=True)
    orphans = orphans[orphans["_merge"] == "left_only"]
    if len(orphans):
        raise ValueError(
            f"{len(orphans)} human-voted items have no GPT-4 verdict, e.g. {orphans[KEY].iloc[0].to_dict()}"
        )
    table = verdicts.rename(columns={"winner": "judge_raw"}).drop(columns=["judge"])
    table = table.merge(human, on=KEY, how="left", indicator=True, validate="one_to_one")
    unlabelled = table["_merge"] == "left_only"
    table = table.drop(columns="_merge")
    table.loc[unlabelled, "human"] = MISSING
    table.loc[unlabelled, ["voters", "votes"]] = None
    for column in ("n_votes", "votes_a", "votes_b", "votes_tie"):
        table[column] = table[column].fillna(0).astype("int64")
    table["human_split"] = table["human_split"].fillna(False).astype(bool)
    if not include_unlabelled:
        table = table[~unlabelled.to_numpy()]

    rows = [_comparison_row(record, questions, answers) for record in table.to_dict(orient="records")]
    frame = pd.DataFrame.from_records(rows)
    return validate_comparisons(frame, source="bundled mtbench")
