"""How DATA is read (:class:`ReadConfig`).

A light module, so that the command line is built from it without importing the readers
(:mod:`.formats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TABLE_NAMES = ("id", "question", "response_a", "response_b", "judge", "human", "question_type", "turn", "model_a",
               "model_b", "history_a", "history_b", "judge_swapped", "judge_confidence")  # fmt: skip
"""The comparison table's column names, which a ``columns`` mapping usually targets."""
FORMAT_NAMES = ("comparisons", "alpaca_eval", "fastchat", "arena", "llmbar", "reward_pairs")
"""The formats :mod:`.formats` reads, in the order it tries them on a file's fields."""


@dataclass(frozen=True)
class ReadConfig:
    """How DATA is read: its format, a mapping of its fields, labels from their own file.

    Attributes:
        format: the file format (comparisons, alpaca_eval, fastchat, arena, llmbar, reward_pairs); none: told
            from the records' fields.
        columns: NAME=FIELD,... renames the file's FIELD to the table's NAME before reading, e.g.
            question=input,response_a=output_1,response_b=output_2,human=label (names: id, question,
            response_a, response_b, judge, human, question_type, turn, model_a, model_b,
            judge_swapped, judge_confidence, or a format's own field). Verdicts may be spelt
            A / model_a / model_1 / left / 1, B / model_b / model_2 / right / 2, tie / draw / C.
        labels: files of human labels joined on ids, comma-separated (id and human columns, e.g. a filled
            to_label.csv, or a file a format reads with labels, e.g. Arena votes); several files join in
            turn, e.g. the labels an audit used and its filled to_label.csv.
        answers: fastchat: the folder with question.jsonl and model_answer/ (default: beside model_judgment/).
        read_as: arena: the winner columns are the human labels or the judge's verdicts.
        order_seed: reward_pairs: the seed of the pairs' order (chosen is not always response_a).
    """

    format: str | None = field(default=None, metadata={"choices": FORMAT_NAMES})
    columns: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    answers: str | None = None
    read_as: str = field(default="labels", metadata={"choices": ("labels", "judge")})
    order_seed: int = 0

    def __post_init__(self):
        for name in ("columns", "labels"):  # a comma-separated string (or one path) is a tuple of its items
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, ())
            elif isinstance(value, str):
                object.__setattr__(self, name, tuple(v.strip() for v in value.split(",") if v.strip()))
            else:
                object.__setattr__(self, name, tuple(value))

    def mapping(self) -> dict[str, str]:
        """``{file field: table name}`` of ``columns``; ValueError naming a malformed or repeated entry."""
        out: dict[str, str] = {}
        for entry in self.columns:
            name, sep, source = (part.strip() for part in str(entry).partition("="))
            if not sep or not name or not source:
                raise ValueError(f"--columns {entry!r}: expected NAME=FIELD (e.g. question=input)")
            if source in out or name in out.values():
                raise ValueError(f"--columns {entry!r}: {source!r} or {name!r} is mapped twice")
            _check_name(name, entry)
            out[source] = name
        return out


def _check_name(name: str, entry: str) -> None:
    """A NAME one letter or two from a table name is a typo: ValueError suggesting the name."""
    import difflib

    if name in TABLE_NAMES:
        return
    close = difflib.get_close_matches(name, TABLE_NAMES, n=1, cutoff=0.8)
    if close:
        raise ValueError(f"--columns {entry!r}: unknown name {name!r} (did you mean {close[0]!r}?)")


READ_DEFAULTS = ReadConfig()
"""The default :class:`ReadConfig` (a shared frozen value for function defaults)."""
