"""LLMFAO: crowd votes vs a GPT-4 or GPT-3.5 verdict, as a comparison table.

Source files (``puaudit_jax/data/llmfao``, provenance in its README): ``crowd-comparisons.csv``
(8,931 crowd votes on 2,139 pairs), ``<judge>-crowd-comparisons.csv`` (one LLM verdict per crowd
pair), ``<judge>-comparisons.csv`` (LLM verdicts on 3,236 pairs: the 2,139 crowd pairs, same ids and
verdicts, plus 1,097 pairs nobody voted on), ``results.jsonl`` (response texts by (prompt, model)),
``prompts.jsonl`` (prompt text and type). ``<judge>`` is ``gpt4`` or ``gpt3`` (GPT-3.5).

**How a row is built**

- One row per LLM-judged pair, in the judge file's order; id = ``"llmfao:<pair id>"``.
- question = the prompt text; question_type = the prompt's type (code, creativity, instruct,
  knowledge, reflexion); response_a = the text of ``model_x`` (shown on the left), response_b = the
  text of ``model_y`` (right). 69 of the 1,133 texts are empty: those rows are kept and excluded later
  as missing text.
- judge: the LLM verdict (left -> A, right -> B, tie -> tie); raw string in ``judge_raw``.
- human: the crowd votes on the pair (1-5 per pair), aggregated by
  :func:`puaudit_jax.datasets.votes.aggregate_votes`: by default the plurality verdict, and a split
  (largest count shared, e.g. 2 left / 2 right / 1 tie) -> ``"tie"`` with ``human_split`` True.
  Counts kept in ``n_votes``, ``votes_a``, ``votes_b``, ``votes_tie``; the votes themselves, in the
  file's order, in ``votes`` ("A,tie,tie"; None where nobody voted), for Krippendorff's alpha. Half of
  the crowd pairs end up as ties under plurality because "tie" is the crowd's most frequent vote;
  ``vote_rule="decisive"`` (tie votes abstain) gives fewer ties.
- ``include_unlabelled=True`` reads ``<judge>-comparisons.csv`` instead: the 1,097 pairs without crowd
  votes join as human = ``"missing"`` (an unlabelled pool for PU learning). Those pairs are all on
  the 6 prompts the crowd never saw (ids 1, 3, 14, 15, 18, 19; 780 of them ``code``, a type with no
  labelled pair), so the pool is shifted relative to the labelled pairs.
- Extra columns: pair_id, prompt (prompt id: group splits by it, since the same responses recur in
  many pairs of a prompt), prompt_slug, model_x, model_y (model ids), model_a, model_b (model names),
  judge_raw, the vote counts, votes and human_split.

Consistency checks (raise ``ValueError``, never drop): every crowd pair has an LLM verdict with the
same prompt and models; every (prompt, model) of a pair has a text record.
"""

from __future__ import annotations

import pandas as pd

from .comparisons import validate_comparisons
from .paths import data_path
from .verdicts import MISSING, normalize_verdict
from .votes import aggregate_votes

JUDGES = {"gpt4": "GPT-4", "gpt3": "GPT-3.5"}
_PAIR = ["prompt", "model_x", "model_y"]


def _crowd_verdicts(folder, vote_rule: str) -> pd.DataFrame:
    """One row per crowd-voted pair id: the aggregated human verdict, vote counts and the pair."""
    crowd = pd.read_csv(folder / "crowd-comparisons.csv", keep_default_na=False)
    crowd["vote"] = [normalize_verdict(w, allow_missing=False) for w in crowd["winner"]]
    if crowd.duplicated(["id", "worker"]).any():
        raise ValueError("crowd-comparisons.csv: a worker voted twice on one pair")
    pairs_per_id = crowd.groupby("id")[_PAIR].nunique()
    if (pairs_per_id > 1).any().any():
        raise ValueError("crowd-comparisons.csv: one pair id names different prompts or models")
    human = aggregate_votes(crowd, ["id"], rule=vote_rule)
    human = human.merge(crowd.groupby("id")["vote"].agg(",".join).rename("votes").reset_index(), on="id",
                        validate="one_to_one")  # fmt: skip
    return human.merge(crowd.drop_duplicates("id")[["id"] + _PAIR], on="id", validate="one_to_one")


def _judged_pairs(folder, name: str, human: pd.DataFrame) -> pd.DataFrame:
    """The judge's verdicts of ``name`` with the crowd's (human = missing where nobody voted)."""
    verdicts = pd.read_csv(folder / name, keep_default_na=False)
    if verdicts["id"].duplicated().any():
        raise ValueError(f"{name}: repeated pair ids")
    table = verdicts.merge(human, on="id", how="left", suffixes=("", "_crowd"), indicator=True, validate="one_to_one")
    voted = table["_merge"] == "both"
    for column in _PAIR:
        differs = voted & (table[column] != table[f"{column}_crowd"])
        if differs.any():
            raise ValueError(
                f"{name}: pair {int(table.loc[differs, 'id'].iloc[0])} has a different {column} "
                f"in crowd-comparisons.csv"
            )
    orphans = set(human["id"]) - set(verdicts["id"])
    if orphans:
        raise ValueError(f"{len(orphans)} crowd-voted pairs have no verdict in {name}, e.g. pair {min(orphans)}")
    table.loc[~voted, "human"] = MISSING
    for column in ("n_votes", "votes_a", "votes_b", "votes_tie"):
        table[column] = table[column].fillna(0).astype("int64")
    table["human_split"] = table["human_split"].fillna(False).astype(bool)
    return table


def _comparison_row(record: dict, prompts: pd.DataFrame, texts: dict) -> dict:
    """One comparison of the package's data model from a judged pair ``record``."""
    prompt, x, y = int(record["prompt"]), int(record["model_x"]), int(record["model_y"])
    for model in (x, y):
        if (prompt, model) not in texts:
            raise ValueError(f"results.jsonl has no text for prompt {prompt}, model {model}")
    return {
        "id": f"llmfao:{int(record['id'])}",
        "question": prompts.at[prompt, "text"],
        "response_a": texts[(prompt, x)],
        "response_b": texts[(prompt, y)],
        "judge": normalize_verdict(record["winner"], allow_missing=False),
        "human": record["human"],
        "question_type": prompts.at[prompt, "type"],
        "turn": None,
        "pair_id": int(record["id"]),
        "prompt": prompt,
        "prompt_slug": prompts.at[prompt, "slug"],
        "model_x": x,
        "model_y": y,
        "model_a": record["left"],
        "model_b": record["right"],
        "judge_raw": record["winner"],
        **{c: record[c] for c in ("n_votes", "votes_a", "votes_b", "votes_tie", "human_split")},
        "votes": record["votes"] if isinstance(record["votes"], str) else None,
    }


def load_llmfao(judge: str, *, include_unlabelled: bool = False, vote_rule: str = "plurality") -> pd.DataFrame:
    """The LLMFAO comparison table for ``judge`` in {"gpt4", "gpt3"}; see the module docstring.

    Args:
        judge: "gpt4" or "gpt3", the judge whose verdicts fill ``judge``.
        include_unlabelled: whether to add the judge's comparisons without crowd votes.
        vote_rule: how the crowd votes make one verdict (:data:`~.votes.VOTE_RULES`).

    Returns:
        The validated comparison table.

    Raises:
        ValueError: an unknown judge, or repeated (prompt, model) records in the bundled files.
    """
    if judge not in JUDGES:
        raise ValueError(f"unknown LLMFAO judge {judge!r}; use one of {sorted(JUDGES)}")
    folder = data_path("llmfao")
    prompts = pd.read_json(folder / "prompts.jsonl", lines=True).set_index("id")
    results = pd.read_json(folder / "results.jsonl", lines=True, dtype={"result": str})
    if results.duplicated(["prompt", "model"]).any():
        raise ValueError("results.jsonl: repeated (prompt, model) records")
    texts = {(int(p), int(m)): r for p, m, r in zip(results["prompt"], results["model"], results["result"])}
    name = f"{judge}-comparisons.csv" if include_unlabelled else f"{judge}-crowd-comparisons.csv"
    table = _judged_pairs(folder, name, _crowd_verdicts(folder, vote_rule))
    rows = [_comparison_row(record, prompts, texts) for record in table.to_dict(orient="records")]
    return validate_comparisons(pd.DataFrame.from_records(rows), source=f"bundled llmfao-{judge}")
