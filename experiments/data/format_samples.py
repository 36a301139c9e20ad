"""Rebuild the bundled samples of the field's file formats (``puaudit_jax/data/formats/``).

Each sample is a subset of records exactly as their authors wrote them (no field changed), taken
from a git snapshot of a public repository at a pinned commit:

- AlpacaEval (tatsu-lab/alpaca_eval, Apache-2.0): the annotations of three judges on the same 805
  outputs of gpt-3.5-turbo-0301 against gpt4_1106_preview; ``--alpaca-n`` instructions drawn at
  random (seed 0), the same instructions in every file.
- FastChat llm_judge (a FastChat fork, Apache-2.0): a user's MT-Bench run, GPT-4 pairwise
  judgments of phi-3 against phi-3-dpo, with the questions and both models' answers; the first
  ``--fastchat-n`` judgments, every later one where the judge's answer was an ``error``, and the
  questions and answers they need.
- Reward-model pairs: the first ``--pairs-n`` lines of the bundled HH-RLHF harmless-base test split.
- LLMBar (princeton-nlp/LLMBar, MIT): the Natural set's ``dataset.json`` and two evaluators'
  ``result.json`` (GPT-4 and ChatGPT-0301, no-rules prompt), the first ``--llmbar-n`` records of each.

    python -m experiments.data.format_samples --alpaca-repo /path/alpaca_eval.git --fastchat-repo /path/FastChat.git \\
        --llmbar-repo /path/LLMBar.git
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from pathlib import Path

import numpy as np

from puaudit_runtime.files import write_text

OUT = Path(__file__).resolve().parents[2] / "puaudit_jax" / "data" / "formats"
ALPACA_COMMIT = "cd543a149df89434d8a54582c0151c0b945c3d20"
ALPACA_ANNOTATORS = ("weighted_alpaca_eval_gpt4_turbo", "alpaca_eval_gpt4_turbo_fn", "alpaca_eval_cot_gpt4_turbo_fn")
ALPACA_MODEL = "gpt-3.5-turbo-0301"
FASTCHAT_COMMIT = "1f5a7b81d3b219f12c18b37511de898556dfa90f"
FASTCHAT_DIR = "fastchat/llm_judge/data/mt_bench"
LLMBAR_COMMIT = "900616bff90b6c6c8e1681f7d079250637c55992"
LLMBAR_DIR = "Dataset/LLMBar/Natural"
LLMBAR_EVALUATORS = ("GPT-4/Vanilla_NoRules", "ChatGPT-0301/Vanilla_NoRules")


def _show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def alpaca_eval(repo: Path, n: int) -> None:
    """``n`` instructions' annotations by the three judges, one JSON array per judge, as published."""
    files = {a: json.loads(_show(repo, ALPACA_COMMIT, f"results/{ALPACA_MODEL}/{a}/annotations.json"))
             for a in ALPACA_ANNOTATORS}  # fmt: skip
    size = len(files[ALPACA_ANNOTATORS[0]])
    keep = sorted(np.random.default_rng(0).choice(size, n, replace=False).tolist())
    for annotator, records in files.items():
        text = json.dumps([records[k] for k in keep], indent=2, ensure_ascii=False)
        write_text(text + "\n", OUT / "alpaca_eval" / f"{annotator}.json")


def fastchat(repo: Path, n: int) -> None:
    """The first ``n`` pairwise judgments, with FastChat's question / model_answer layout beside them."""
    lines = _show(repo, FASTCHAT_COMMIT, f"{FASTCHAT_DIR}/model_judgment/gpt-4_pair.jsonl").splitlines()
    judgments = [line for line in lines if line.strip()]
    errors = [
        line for line in judgments[n:] if "error" in (json.loads(line)["g1_winner"], json.loads(line)["g2_winner"])
    ]
    judgments = judgments[:n] + errors
    records = [json.loads(line) for line in judgments]
    qids = {int(r["question_id"]) for r in records}
    models = sorted({r[k] for r in records for k in ("model_1", "model_2")})
    out = OUT / "fastchat" / "mt_bench"
    write_text("\n".join(judgments) + "\n", out / "model_judgment" / "gpt-4_pair.jsonl")
    questions = _show(repo, FASTCHAT_COMMIT, f"{FASTCHAT_DIR}/question.jsonl").splitlines()
    kept = "".join(q + "\n" for q in questions if q.strip() and json.loads(q)["question_id"] in qids)
    write_text(kept, out / "question.jsonl")
    for model in models:
        answers = _show(repo, FASTCHAT_COMMIT, f"{FASTCHAT_DIR}/model_answer/{model}.jsonl").splitlines()
        kept = [a for a in answers if a.strip() and int(json.loads(a)["question_id"]) in qids]
        write_text("\n".join(kept) + "\n", out / "model_answer" / f"{model}.jsonl")


def reward_pairs(n: int) -> None:
    """The first ``n`` HH-RLHF harmless-base test pairs (chosen, rejected transcripts)."""
    source = OUT.parent / "hh_rlhf" / "harmless-base_test.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        lines = [next(handle) for _ in range(n)]
    write_text("".join(lines), OUT / "reward_pairs" / "hh_rlhf_harmless_base_test.jsonl")


def llmbar(repo: Path, n: int) -> None:
    """The first ``n`` records of the Natural set's dataset.json and of two evaluators' result.json."""
    out = OUT / "llmbar" / "Natural"
    for name in ("dataset.json", *(f"evaluators/{e}/result.json" for e in LLMBAR_EVALUATORS)):
        records = json.loads(_show(repo, LLMBAR_COMMIT, f"{LLMBAR_DIR}/{name}"))[:n]
        write_text(json.dumps(records, indent=4, ensure_ascii=False) + "\n", out / name)


def main(argv=None) -> None:
    """Write every sample (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alpaca-repo", type=Path, required=True, help="git dir of tatsu-lab/alpaca_eval")
    p.add_argument("--fastchat-repo", type=Path, required=True, help="git dir of Stefanstud/FastChat")
    p.add_argument("--llmbar-repo", type=Path, required=True, help="git dir of princeton-nlp/LLMBar")
    p.add_argument("--alpaca-n", type=int, default=80)
    p.add_argument("--llmbar-n", type=int, default=40)
    p.add_argument("--fastchat-n", type=int, default=30)
    p.add_argument("--pairs-n", type=int, default=60)
    args = p.parse_args(argv)
    alpaca_eval(args.alpaca_repo, args.alpaca_n)
    fastchat(args.fastchat_repo, args.fastchat_n)
    reward_pairs(args.pairs_n)
    llmbar(args.llmbar_repo, args.llmbar_n)


if __name__ == "__main__":
    main()
