"""FastChat llm_judge pairwise judgments (Zheng et al. 2023, github.com/lm-sys/FastChat): ``*_pair.jsonl``.

Each record is one judge's verdict on two models' answers to a question, in both orders:
``question_id``, ``model_1``, ``model_2``, ``g1_winner`` (the answers shown as given), ``g2_winner``
(shown swapped; FastChat already maps it back to the model names), ``judge`` (its model and prompt),
``turn``. ``model_1`` / ``model_2`` / ``tie`` are verdicts; ``error`` (the judge's answer could not be
parsed) becomes a missing verdict, named in the read report. Other fields are kept as extra columns.

The texts come from FastChat's layout: ``question.jsonl`` and ``model_answer/<model>.jsonl`` in the
folder above ``model_judgment/``, or in the folder ``answers`` names (``--answers DIR``: a folder
with ``question.jsonl`` and ``model_answer/``, or the ``model_answer`` folder itself with
``question.jsonl`` beside or inside it).

How a row is built (one per record):

- ``id`` = ``"<question_id>:<model_1>:<model_2>:t<turn>"``;
- turn 1: question = the first user turn, response_a / response_b = the models' first answers;
  turn 2: question = both user turns, the responses are the second answers, and ``history_a`` /
  ``history_b`` hold each model's own first answer (what the judge saw before it);
- judge = g1_winner, ``judge_swapped`` = g2_winner (model_1 -> A, model_2 -> B), ``judge_model`` =
  the judge field; model_a / model_b = model_1 / model_2; question_type = the question's category;
- an answer missing from ``model_answer`` gives a missing text: the row is kept and excluded later
  with its reason.

Single-answer grading files (a ``score`` per answer) are not pairwise verdicts and are refused by name.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from .mtbench import load_answers
from .reading import Read, report_of, table_of
from .records import Records
from .verdicts import MISSING, TIE, A, B, is_null

NAME = "fastchat"
FIELDS = frozenset({"question_id", "model_1", "model_2", "g1_winner"})
SINGLE_FIELDS = frozenset({"question_id", "model", "score"})
IDS = "<question_id>:<model_1>:<model_2>:t<turn>"
_WINNERS = {"model_1": A, "model_2": B, "tie": TIE, "error": MISSING}


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are FastChat pairwise judgments (single-answer files are refused)."""
    if SINGLE_FIELDS <= columns and not FIELDS <= columns:
        raise ValueError("these are FastChat single-answer grading records (a score per answer), not pairwise "
                         "verdicts: give a pairwise judgment file (model_judgment/*_pair.jsonl)")  # fmt: skip
    return FIELDS <= columns


def layout(judgments: Path, answers: str | None) -> tuple[Path, Path]:
    """(question.jsonl, model_answer folder) for a judgment file, by FastChat's layout or ``answers``.

    Args:
        judgments: a ``model_judgment/*_pair.jsonl`` file.
        answers: None, or a folder with question.jsonl and model_answer/ (or the model_answer folder).

    Raises:
        FileNotFoundError: naming the places looked in.
    """
    if answers is None:
        base = judgments.resolve().parent.parent
        candidates = [(base / "question.jsonl", base / "model_answer")]
    else:
        folder = Path(answers)
        candidates = [(folder / "question.jsonl", folder / "model_answer"), (folder / "question.jsonl", folder),
                      (folder.parent / "question.jsonl", folder)]  # fmt: skip
    for questions, answer_dir in candidates:
        if questions.is_file() and answer_dir.is_dir() and any(answer_dir.glob("*.jsonl")):
            return questions, answer_dir
    looked = "; ".join(f"{q} and {a}/<model>.jsonl" for q, a in candidates)
    raise FileNotFoundError(f"{judgments}: FastChat judgments need the questions and answers (looked for {looked}); "
                            "pass --answers DIR (answers=DIR) with question.jsonl and model_answer/")  # fmt: skip


def _winner(value, where: str, field: str, unreadable: list[str]) -> str:
    key = "error" if is_null(value) else str(value).strip().lower()
    if key not in _WINNERS:
        raise ValueError(f"{where}: field {field!r}: unknown winner {value!r} (FastChat writes model_1, model_2, "
                         "tie or error)")  # fmt: skip
    if _WINNERS[key] == MISSING:
        unreadable.append(f"{where}: {field} is {value!r}")
    return _WINNERS[key]


def _judge_name(value) -> str:
    if isinstance(value, str) and value.startswith("["):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return "/".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _row(record: dict, where: str, questions: dict, answers: dict, unreadable: list[str]) -> dict:
    qid, turn = int(record["question_id"]), int(record.get("turn") or 1)
    question = questions.get(qid)
    if question is None:
        raise ValueError(f"{where}: question_id {qid} is not in question.jsonl")
    users = list(question["turns"][:turn])
    row = {"id": f"{qid}:{record['model_1']}:{record['model_2']}:t{turn}",
           "question": users[0] if turn == 1 else users,
           "judge": _winner(record["g1_winner"], where, "g1_winner", unreadable)}  # fmt: skip
    for side, model in (("a", record["model_1"]), ("b", record["model_2"])):
        turns = answers.get((qid, model))
        row[f"response_{side}"] = turns[turn - 1] if turns is not None and len(turns) >= turn else None
        row[f"history_{side}"] = list(turns[: turn - 1]) if turns is not None else None
    if "g2_winner" in record:
        row["judge_swapped"] = _winner(record["g2_winner"], where, "g2_winner", unreadable)
    row.update(human=MISSING, question_type=question.get("category"), turn=turn, model_a=record["model_1"],
               model_b=record["model_2"], judge_model=_judge_name(record.get("judge")))  # fmt: skip
    skip = {"g1_winner", "g2_winner", "judge", "turn", "model_1", "model_2"}
    row.update({k: v for k, v in record.items() if k not in skip and k not in row})
    return row


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of FastChat pairwise judgment files (module docstring).

    Args:
        sources: the judgment files' records.
        config: the read settings; ``config.answers`` overrides the layout's folder.
    """
    unreadable: list[str] = []

    def rows_of(records: Records):
        questions_file, answer_dir = layout(records.path, getattr(config, "answers", None))
        with open(questions_file, encoding="utf-8") as handle:
            questions = {int(q["question_id"]): q for q in map(json.loads, filter(str.strip, handle))}
        answers = load_answers(answer_dir)
        return lambda record, where: _row(record, where, questions, answers, unreadable)

    table = table_of(sources, rows_of)
    return Read(table, report_of(NAME, [s.path for s in sources], len(table), table, IDS, unreadable))
