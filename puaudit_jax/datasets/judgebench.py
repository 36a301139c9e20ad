"""JudgeBench (Tan et al. 2024, arXiv:2410.12784): response pairs with objective labels, judges in both orders.

620 pairs of responses by one model to hard questions (350 by GPT-4o, 270 by Claude-3.5-Sonnet), of
which exactly one is correct: the label is objective (the ``human`` column here), not a preference.
Four kinds of question (``question_type``): knowledge (MMLU-Pro, 14 subjects), reasoning and math
(LiveBench), coding (LiveCodeBench). The pairs are bundled (``data/judgebench/``, MIT licence, as the
authors publish them on Hugging Face).

The judges' verdicts are not bundled: the authors' repository (github.com/ScalerLab/JudgeBench)
states no licence for them. :func:`load_judgebench` reads them from a clone's ``outputs/`` folder.
Each judge file holds, per pair, the judge's decision with the responses in the given order and,
for prompted judges, with the two swapped; both become columns of the comparison table:

- ``judge``: the chosen judge's decision in the given order (``A>B`` -> A, ``B>A`` -> B, ``A=B`` ->
  tie; a pair without a decision is "missing" with ``judge_status`` saying so: the audit excludes
  it with a count, quantify leaves it out and counts it);
- ``judge_swapped``: its decision with the responses swapped, in the original frame (A = response_a);
  missing where there is none;
- ``judge_confidence``: the strength of an Arena-Hard-style verdict (``[[A>>B]]`` 1.0, ``[[A>B]]``
  0.5, ``[[A=B]]`` 0.0), of a reward model the sigmoid of its score difference (a probability that
  its preferred response is better); missing where the judgement has neither;
- ``other_<judge>``: every other judge of the same responses (first order), named by its model.

    load_judgebench_pairs("gpt" | "claude") -> the pairs (no judge), every row labelled
    load_judgebench("gpt", outputs=PATH, judge=None) -> a comparison table with the evidence columns
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .comparisons import validate_comparisons
from .paths import data_path
from .reading import slug
from .verdicts import MISSING, TIE, A, B

__all__ = ["JUDGEBENCH_SPLITS", "judge_files", "load_judgebench", "load_judgebench_pairs"]

#: split -> (model that wrote the responses, the prompted judge the authors ran in both orders on it)
JUDGEBENCH_SPLITS = {
    "gpt": ("gpt-4o-2024-05-13", "o1-mini-2024-09-12"),
    "claude": ("claude-3-5-sonnet-20240620", "claude-3-haiku-20240307"),
}
_DECISIONS = {"A>B": A, "B>A": B, "A=B": TIE}
_STRENGTH = re.compile(r"\[\[(A>>B|B>>A|A>B|B>A|A=B)\]\]")
_FILE = re.compile(
    r"dataset=judgebench,response_model=(?P<responses>[^,]+),judge_name=(?P<name>[^,]+),judge_model=(?P<model>.+)\.jsonl$"
)


def _split(split: str) -> str:
    if split not in JUDGEBENCH_SPLITS:
        raise ValueError(f"unknown JudgeBench split {split!r}; use one of {sorted(JUDGEBENCH_SPLITS)}")
    return JUDGEBENCH_SPLITS[split][0]


def _question_type(source: str) -> str:
    """JudgeBench's four categories from a pair's ``source``."""
    if source.startswith("mmlu-pro"):
        return "knowledge"
    return {"livebench-reasoning": "reasoning", "livebench-math": "math", "livecodebench": "coding"}.get(source, source)


def load_judgebench_pairs(split: str = "gpt") -> pd.DataFrame:
    """The bundled pairs of ``split`` as a table without judge verdicts.

    Args:
        split: "gpt" (350 pairs by GPT-4o) or "claude" (270 pairs by Claude-3.5-Sonnet).

    Returns:
        One row per pair, file order: id (``pair_id``), question, response_a, response_b, human (the
        correct response, A or B), question_type (knowledge | reasoning | math | coding), source,
        original_id, response_model.
    """
    path = data_path("judgebench", f"pairs_{_split(split)}.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    table = pd.DataFrame(
        {
            "id": [r["pair_id"] for r in rows],
            "question": [r["question"] for r in rows],
            "response_a": [r["response_A"] for r in rows],
            "response_b": [r["response_B"] for r in rows],
            "human": [_DECISIONS[r["label"]] for r in rows],
            "question_type": [_question_type(r["source"]) for r in rows],
            "source": [r["source"] for r in rows],
            "original_id": [str(r["original_id"]) for r in rows],
            "response_model": [r["response_model"] for r in rows],
        }
    )
    return table


def judge_files(outputs: str | Path, split: str = "gpt") -> dict[str, Path]:
    """The judge output files of ``split`` in a JudgeBench clone's ``outputs/`` folder, by judge model.

    Raises:
        FileNotFoundError: the folder does not exist or holds no file for the split.
    """
    folder = Path(outputs)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (a clone of github.com/ScalerLab/JudgeBench's outputs/)")
    responses = _split(split)
    found = {}
    for path in sorted(folder.glob("*.jsonl")):
        match = _FILE.match(path.name)
        if match and match["responses"] == responses:
            found[match["model"]] = path
    if not found:
        raise FileNotFoundError(f"{folder}: no JudgeBench judge file for the {responses} responses")
    return found


def _judgments(record: dict) -> list:
    raw = record.get("judgments") or []
    return ast.literal_eval(raw) if isinstance(raw, str) else list(raw)


def _decision(judgment) -> str:
    if not judgment or judgment.get("decision") is None:
        return MISSING
    return _DECISIONS.get(judgment["decision"], MISSING)


def _confidence(judgment) -> float:
    """Verdict strength in [0, 1] (module docstring), NaN where the judgement shows none."""
    if not judgment:
        return np.nan
    inner = judgment.get("judgment") or {}
    scores = inner.get("scores")
    if scores is not None and len(scores) == 2 and all(np.isfinite(scores)):
        return float(1.0 / (1.0 + np.exp(-abs(float(scores[0]) - float(scores[1])))))
    found = _STRENGTH.findall(str(inner.get("response") or ""))
    if not found:
        return np.nan
    return {"A>>B": 1.0, "B>>A": 1.0, "A>B": 0.5, "B>A": 0.5, "A=B": 0.0}[found[-1]]


def _read_judge(path: Path) -> pd.DataFrame:
    """One judge file: per pair id, the verdict, the swapped verdict (original frame), the confidence."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        js = _judgments(record)
        first = js[0] if js else None
        second = js[1] if len(js) > 1 else None
        swapped = _decision(second)
        rows.append(
            dict(
                id=record["pair_id"],
                verdict=_decision(first),
                swapped={A: B, B: A}.get(swapped, swapped),  # the swapped order's A is response_b
                confidence=_confidence(first),
            )
        )
    return pd.DataFrame(rows).set_index("id")


def load_judgebench(split: str = "gpt", *, outputs: str | Path, judge: str | None = None) -> pd.DataFrame:
    """A comparison table of ``split`` judged by ``judge``, with the other judges as evidence.

    Args:
        split: "gpt" or "claude" (:func:`load_judgebench_pairs`).
        outputs: a JudgeBench clone's ``outputs/`` folder.
        judge: the judge model whose verdicts are audited (a key of :func:`judge_files`); default the
            prompted judge the authors ran in both orders on the split (:data:`JUDGEBENCH_SPLITS`).

    Returns:
        A validated comparison table (:func:`load_judgebench_pairs`'s columns plus judge,
        judge_swapped, judge_confidence, judge_status and one ``other_<model>`` column per other judge
        file of the split). Every pair is a row; a pair a judge file lacks gets a missing verdict there.

    Raises:
        FileNotFoundError: no such folder or judge file; ValueError: an unknown split or judge.
    """
    files = judge_files(outputs, split)
    judge = judge or JUDGEBENCH_SPLITS[split][1]
    if judge not in files:
        raise ValueError(f"no JudgeBench file of judge {judge!r} for the {split} split; have {sorted(files)}")
    table = load_judgebench_pairs(split)
    main = _read_judge(files[judge]).reindex(table["id"])
    verdict = main["verdict"].fillna(MISSING).to_numpy(dtype=object)
    table["judge"] = verdict
    table["judge_status"] = np.where(verdict == MISSING, "no verdict in the source", "ok")
    table["judge_swapped"] = main["swapped"].fillna(MISSING).to_numpy(dtype=object)
    table["judge_confidence"] = main["confidence"].to_numpy(float)
    for model, path in files.items():
        if model != judge:
            other = _read_judge(path).reindex(table["id"])
            table[f"other_{slug(model)}"] = other["verdict"].fillna(MISSING).to_numpy(dtype=object)
    return validate_comparisons(table, source=f"JudgeBench {split} judged by {judge}")
