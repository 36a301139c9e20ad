r"""Reward-model preference pairs: ``prompt``, ``chosen``, ``rejected`` (HH-RLHF, UltraFeedback, ...).

Three shapes are read, per record:

- ``prompt`` with ``chosen`` / ``rejected`` texts: question = the prompt;
- ``chosen`` / ``rejected`` as chat messages (lists of ``{"role", "content"}``, the prompt included):
  the last message is the response, the user messages before it the question (a list when several);
- ``chosen`` / ``rejected`` as whole transcripts without a prompt (HH-RLHF's ``"\n\nHuman: ...
  \n\nAssistant: ..."``): the text up to the last ``"\n\nAssistant:"`` is the question (the two
  must share it), the rest the response.

The order is randomised so that ``chosen`` is not always response_a: a pair is swapped when the
SHA-256 of ``"<order_seed>:<id>"`` is odd, so the order depends only on the record and the seed, and
the human label follows (A where chosen is response_a). ``id`` = the record's ``id`` field, else
:func:`~puaudit_jax.datasets.reading.content_id` ``("pair:", question, chosen, rejected)``. These files
hold no judge: ``judge`` is missing.
"""

from __future__ import annotations

import hashlib

from .reading import Read, content_id, report_of, table_of
from .records import Records
from .verdicts import MISSING, A, B, is_null

NAME = "reward_pairs"
FIELDS = frozenset({"chosen", "rejected"})
IDS = "the record's id, else pair: + SHA-256 of [question, chosen, rejected] (16 hex digits)"
_ASSISTANT = "\n\nAssistant:"


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are reward-model preference pairs."""
    return FIELDS <= columns


def _messages(value, where: str, field: str) -> tuple[list[str], str]:
    """(user turns before the response, the response) of a chat-message list."""
    if not value or not all(isinstance(m, dict) and "content" in m for m in value):
        raise ValueError(f"{where}: field {field!r}: expected a list of {{'role', 'content'}} messages")
    users = [str(m["content"]) for m in value[:-1] if m.get("role") in ("user", "human")]
    return users, str(value[-1]["content"])


def _split(record: dict, where: str) -> tuple[object, str, str]:
    """(question, chosen response, rejected response) of one record."""
    chosen, rejected = record["chosen"], record["rejected"]
    if hasattr(chosen, "tolist"):
        chosen, rejected = chosen.tolist(), rejected.tolist()
    if isinstance(chosen, list):
        users, good = _messages(chosen, where, "chosen")
        _, bad = _messages(rejected, where, "rejected")
        prompt = record.get("prompt")
        question = users if len(users) > 1 else (users[0] if users else prompt)
        return question, good, bad
    if not isinstance(chosen, str) or not isinstance(rejected, str):
        raise ValueError(f"{where}: fields 'chosen' / 'rejected': expected texts or message lists")
    prompt = record.get("prompt")
    if prompt is not None and not is_null(prompt):
        return prompt, chosen, rejected
    cut = chosen.rfind(_ASSISTANT)
    if cut < 0 or rejected[: cut + len(_ASSISTANT)] != chosen[: cut + len(_ASSISTANT)]:
        raise ValueError(f"{where}: no 'prompt' field, and 'chosen' / 'rejected' do not share a transcript up to "
                         "their last '\\n\\nAssistant:' (map the prompt with --columns prompt=FIELD)")  # fmt: skip
    end = cut + len(_ASSISTANT)
    return chosen[:cut].strip(), chosen[end:].strip(), rejected[end:].strip()


def swapped(seed: int, id: str) -> bool:
    """Whether the pair ``id`` shows ``rejected`` first under ``seed`` (module docstring)."""
    return hashlib.sha256(f"{seed}:{id}".encode()).digest()[-1] % 2 == 1


def _row(record: dict, seed: int, where: str) -> dict:
    question, good, bad = _split(record, where)
    given = record.get("id")
    id = str(given) if given is not None and not is_null(given) else content_id("pair:", question, good, bad)
    flip = swapped(seed, id)
    skip = {"id", "prompt", "chosen", "rejected"}
    return {"id": id, "question": question, "response_a": bad if flip else good, "response_b": good if flip else bad,
            "judge": MISSING, "human": B if flip else A,
            **{k: v for k, v in record.items() if k not in skip}}  # fmt: skip


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of reward-model pair files (module docstring).

    Args:
        sources: the files' records.
        config: the read settings; ``config.order_seed`` seeds the order (default 0).
    """
    seed = int(getattr(config, "order_seed", 0))
    table = table_of(sources, lambda records: lambda record, where: _row(record, seed, where))
    first = int((table["human"] == A).sum())
    notes = [f"order seed {seed}: chosen is response_a in {first:,} of {len(table):,} pairs (human = the chosen side)",
             "no judge verdicts: these pairs are labels; join a judge's table with --labels"]  # fmt: skip
    return Read(table, report_of(NAME, [s.path for s in sources], len(table), table, IDS, (), notes))
