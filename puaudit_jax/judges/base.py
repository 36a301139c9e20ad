"""Verdicts, the judge protocol, the paper's prompt templates, the verdict parser and the disk cache.

The judge prompt is the paper's Figure 10 (Appendix B.3): an instruction (system message) and the
``[User Question] / [Assistant A] / [Assistant B]`` block (user message); the judge must end with
``[[A]]``, ``[[B]]`` or ``[[C]]`` (tie) and ``[[TYPE:X]]``, X in A..F. The attack templates are
Figures 7-9 (Appendix B.2). All templates are text files in ``puaudit_jax/judges/templates/``
(package data), filled with ``str.replace`` so braces inside responses are never interpreted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol, runtime_checkable

from puaudit_runtime.cache import cache_dir
from puaudit_runtime.files import atomic_path

from ..datasets.verdicts import JUDGE_VERDICTS, MISSING, TIE, A, B, normalize_verdict

OK, UNPARSED, ERROR = "ok", "unparsed", "error"
STATUSES = (OK, UNPARSED, ERROR)
WINNERS = JUDGE_VERDICTS
QUESTION_TYPES = ("A", "B", "C", "D", "E", "F")
QUESTION_TYPE_NAMES = {
    "A": "Programming",
    "B": "Math or logical reasoning",
    "C": "Factual or knowledge-based",
    "D": "Writing, translation, summarization, creative",
    "E": "Advice, recommendation, planning",
    "F": "Other, meta-level, unclear",
}


@dataclass(frozen=True)
class Verdict:
    """One judgment of a pair.

    ``winner``: "A" | "B" | "tie" (seed ``[[C]]``), or None when ``status`` is not "ok".
    ``question_type``: the judge's ``[[TYPE:X]]`` letter (A..F) or None.
    ``raw``: the judge's text (HTTP judges) or a log-probability summary (local judge); the error
    message when ``status == "error"``.
    ``status``: "ok" | "unparsed" (no verdict, or conflicting verdicts) | "error" (the call failed).
    ``details``: judge-specific numbers (local judge: per-order verdicts, margins, consistency).
    """

    winner: str | None
    question_type: str | None
    raw: str
    status: str = OK
    details: Mapping[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == OK and self.winner not in WINNERS:
            raise ValueError(f"an ok verdict needs winner in {WINNERS}, got {self.winner!r}")
        if self.status != OK and self.winner is not None:
            raise ValueError(f"a {self.status} verdict has no winner (got {self.winner!r})")


@runtime_checkable
class Judge(Protocol):
    """A pairwise judge (seed Algorithm 2's offline judge A_LLM)."""

    name: str

    def judge(self, question: str, response_a: str, response_b: str) -> Verdict:
        """The verdict on one pair: which of ``response_a`` / ``response_b`` answers ``question`` better.

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
        """
        ...

    def judge_many(self, items: Sequence[tuple[str, str, str]], *, progress: bool = False) -> list[Verdict]:
        """Verdicts on many (question, response_a, response_b) items, in order."""
        ...


@runtime_checkable
class Generator(Protocol):
    """A text generator for rewrite attacks: chat messages -> completion text."""

    name: str

    def generate_many(self, conversations: Sequence[list[dict]], *, progress: bool = False) -> list[str | Exception]:
        """One completion text per conversation (chat messages), in order; a failed one is its exception."""
        ...


# --------------------------------------------------------------------------------------------------
# templates

TEMPLATE_NAMES = (
    "judge_system",
    "judge_user",
    "distraction",
    "length_system",
    "length_user",
    "sentiment_system",
    "sentiment_user",
)


def template(name: str) -> str:
    """The text of a package template (``templates/<name>.txt``), trailing newline removed."""
    if name not in TEMPLATE_NAMES:
        raise ValueError(f"unknown template {name!r}; use one of {TEMPLATE_NAMES}")
    return resources.files("puaudit_jax.judges").joinpath("templates", f"{name}.txt").read_text("utf-8").rstrip("\n")


def fill(text: str, **values: str) -> str:
    """Replace ``{key}`` by ``values[key]`` (plain replacement: other braces are left alone)."""
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def judge_messages(question: str, response_a: str, response_b: str) -> list[dict[str, str]]:
    """The paper's Figure 10 judge prompt as chat messages [system, user].

    Args:
        question: the user question (the judge prompt's question text).
        response_a: the answer shown as assistant A.
        response_b: the answer shown as assistant B.
    """
    user = fill(template("judge_user"), question=question, response_a=response_a, response_b=response_b)
    return [{"role": "system", "content": template("judge_system")}, {"role": "user", "content": user}]


def judge_inputs(
    question, response_a: str | None, response_b: str | None, history_a=None, history_b=None
) -> tuple[str, str, str]:
    """(question, response_a, response_b) texts for the judge prompt from a comparison row.

    Single-turn: unchanged (None as ""). Multi-turn: every user turn and each side's answers are labelled
    ``### Turn i``, so the judge sees both full conversations (the judged answer is the last one).

    Args:
        question: the user text, or the list of k user turns (None: "").
        response_a: side A's judged answer (None: "").
        response_b: side B's judged answer (None: "").
        history_a: side A's k - 1 earlier answers (None or [] for single-turn).
        history_b: side B's k - 1 earlier answers.

    Raises:
        ValueError: a history whose length is not the user turns less one.
    """
    if isinstance(question, str) or question is None:
        return question or "", response_a or "", response_b or ""
    turns = list(question)
    if len(turns) == 1:
        return turns[0], response_a or "", response_b or ""

    def side(history, response):
        answers = list(history if history is not None else []) + [response or ""]
        if len(answers) != len(turns):
            raise ValueError(f"{len(turns)} user turns need {len(turns) - 1} earlier answers, got {len(answers) - 1}")
        return "\n\n".join(f"### Turn {i + 1}\n{a}" for i, a in enumerate(answers))

    q = "\n\n".join(f"### Turn {i + 1}\n{u}" for i, u in enumerate(turns))
    return q, side(history_a, response_a), side(history_b, response_b)


def row_inputs(row: Mapping) -> tuple[str, str, str]:
    """:func:`judge_inputs` of a comparison-table row (a dict or a pandas row)."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    return judge_inputs(
        get("question"),
        get("response_a"),
        get("response_b"),
        _listish(get("history_a", None)),
        _listish(get("history_b", None)),
    )


def _listish(value):
    if value is None:
        return None
    try:
        return list(value)
    except TypeError:
        return None  # NaN / scalar: no history


# --------------------------------------------------------------------------------------------------
# parser

_MARKDOWN = re.compile(r"[*_`~>#]")
_VERDICT = re.compile(r"\[\[\s*(A|B|C|TIE)\s*\]\]", re.IGNORECASE)
_TYPE = re.compile(r"\[\[\s*TYPE\s*[:=]\s*([A-F])\s*\]\]", re.IGNORECASE)


def parse_verdict(text: str | None, *, tail_lines: int = 3) -> Verdict:
    """Verdict of a judge's free text (seed Figure 10 output format).

    Only the last ``tail_lines`` non-empty lines are read (the format puts the verdict and the type
    in the last two; one line of trailing chatter is tolerated), so a verdict quoted earlier in the
    explanation or inside a response is ignored. Markdown emphasis (``**[[A]]**``), case and
    spaces inside the brackets (``[[ b ]]``) are tolerated. ``[[C]]`` (or ``[[tie]]``) is a tie.
    No verdict, or two different verdicts in the tail ("[[A]] ... actually [[B]]"), gives status
    "unparsed" and no winner: the parser never guesses. Two different types give type None.
    """
    if text is None:
        return Verdict(None, None, "", UNPARSED, {"reason": "no text"})
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    tail = _MARKDOWN.sub("", "\n".join(lines[-tail_lines:])) if lines else ""
    letters = {m.upper() for m in _VERDICT.findall(tail)}
    types = {m.upper() for m in _TYPE.findall(tail)}
    qtype = next(iter(types)) if len(types) == 1 else None
    if not letters:
        return Verdict(None, qtype, str(text), UNPARSED, {"reason": "no verdict in the last lines"})
    mapped = {normalize_verdict(x, allow_missing=False) for x in letters}  # A, B; C and TIE -> tie
    if len(mapped) > 1:
        return Verdict(
            None, qtype, str(text), UNPARSED, {"reason": f"conflicting verdicts {sorted(mapped)} in the last lines"}
        )
    return Verdict(mapped.pop(), qtype, str(text), OK)


# --------------------------------------------------------------------------------------------------
# verdicts from next-token log-probabilities (the local judge and a served judge's logprob mode)

VERDICT_LETTERS = ("A", "B", "C")  # the letters after "[[" in the paper's prompt; C is a tie


#: Why a pair's log-probabilities give no verdict: the A - B margin is NaN (a NaN, or the same infinity for both).
NO_MARGIN = "the log-probabilities of A and B give no margin (a NaN, or the same infinity for both)"


def logprob_winner(logp: Sequence[float], *, tie_margin: float = 0.0, c_is_tie: bool = False) -> str:
    """Winner of (log p("A"), log p("B"), log p("C")): the sign of the A - B margin (nats).

    Args:
        logp: (log p("A"), log p("B"), log p("C")), natural logs.
        tie_margin: a tie when ``|margin|`` is below this (nats); a margin of 0 is a tie too.
        c_is_tie: whether a "C" more likely than both "A" and "B" is a tie.

    Returns:
        "A", "B", "tie", or ``MISSING`` when the margin is NaN (:data:`NO_MARGIN`): a NaN read as B was
        recorded as a verdict.
    """
    la, lb, lc = (float(x) for x in logp)
    margin = la - lb
    if margin != margin:  # NaN
        return MISSING
    if c_is_tie and lc > max(la, lb):
        return TIE
    if abs(margin) < tie_margin or margin == 0.0:
        return TIE
    return A if margin > 0 else B


def two_order_verdict(
    logp_ab: Sequence[float], logp_ba: Sequence[float], *, tie_margin: float = 0.0, c_is_tie: bool = False
) -> tuple[str, dict]:
    """(winner, details) of a pair judged in both presentation orders.

    The winner is :func:`logprob_winner` of the two orders' mean.

    Args:
        logp_ab: log p(A, B, C) with the pair shown as (A, B) (nats).
        logp_ba: log p(A, B, C) with the pair shown as (B, A), already swapped back so that the original
            A comes first.
        tie_margin: as :func:`logprob_winner`.
        c_is_tie: as :func:`logprob_winner`.

    Returns:
        (winner, details); details: verdict_ab, verdict_ba (per order, original labels), logp_ab,
        logp_ba, margin (mean log p(A) - log p(B), nats), consistent (both orders agree).
    """
    ab, ba = [float(x) for x in logp_ab], [float(x) for x in logp_ba]
    mean = [(x + y) / 2 for x, y in zip(ab, ba)]
    rule = {"tie_margin": tie_margin, "c_is_tie": c_is_tie}
    v_ab, v_ba = logprob_winner(ab, **rule), logprob_winner(ba, **rule)
    details = {
        "verdict_ab": v_ab,
        "verdict_ba": v_ba,
        "logp_ab": ab,
        "logp_ba": ba,
        "margin": mean[0] - mean[1],
        "consistent": v_ab == v_ba,
    }
    return logprob_winner(mean, **rule), details


# --------------------------------------------------------------------------------------------------
# cache


def content_key(*parts: object) -> str:
    """sha256 hex of the JSON encoding of ``parts`` (model, prompt, decoding settings)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_cache_dir() -> Path:
    """The judges' response cache folder: $PUAUDIT_CACHE/judges, else ~/.cache/puaudit/judges."""
    return cache_dir("judges")


class ResponseCache:
    """Content-addressed JSON store: ``<dir>/<key[:2]>/<key>.json``.

    Writes are atomic (:func:`puaudit_runtime.files.atomic_path`), so concurrent writers and crashes
    never leave a partial entry. Values are JSON-serialisable dicts.
    """

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The value stored under ``key``, or None (missing or unreadable entry)."""
        path = self._path(key)
        try:
            return json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # unreadable entry: treated as a miss and overwritten

    def put(self, key: str, value: dict) -> None:
        """Store ``value`` under ``key`` (atomically, replacing any earlier value)."""
        with atomic_path(self._path(key), prefix=".tmp-") as tmp, open(tmp, "w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=False)


def progress_iter(iterable: Iterable, total: int | None, enabled: bool, desc: str):
    """``tqdm`` over ``iterable`` when enabled (stderr), else the iterable itself.

    Args:
        iterable: what to iterate over.
        total: its length, or None when unknown.
        enabled: whether to show the bar.
        desc: the bar's label.
    """
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)
