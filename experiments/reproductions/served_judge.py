"""The judge through llama.cpp's real OpenAI-compatible server beside the in-process judge.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.served_judge \
        [--threads 2] [--text-pairs 40] [--throughput-pairs 12] [--port 8765]

Needs the ``serve`` extra (``make serve-install``). Starts ``puaudit serve-local``'s server
(SmolLM2-135M-Instruct Q4_1 GGUF, the same file the Flax port is converted from) and measures:

1. Logprob verdicts (``OpenAILogprobJudge``: log p("A") vs log p("B") after ``[[``, both orders,
   from the completions endpoint's ``top_logprobs``) on the 240 MT-Bench expert-labelled pairs of
   ``results/local_judge/mtbench_local.csv``, against the in-process ``LocalJudge``'s verdicts
   recorded there: agreement of the final and per-order verdicts (Wilson 95 % intervals), margin
   correlation, letter log-probability differences, agreement with the experts and position
   consistency of each runtime. The local file was judged with a 2,048-token prompt cap
   (middle-out); the server sees whole prompts, so rows the local judge shortened are reported
   apart.
2. Text verdicts (``OpenAIChatJudge``: the model writes its answer, ``[[A]]/[[B]]/[[C]]`` parsed)
   on ``--text-pairs`` of those pairs: parse rate and agreement with the experts.
3. Throughput of logprob judging at ``--concurrency`` 1, 4 and 8 (cache off, same pairs):
   requests per second and seconds per pair.

Writes ``results/served_judge.json`` / ``.md``. Verdicts are cached under ``results/tmp/served_cache``
(rerunning resumes; the attack experiment reuses them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import LOCAL_JUDGE_CSV, RESULTS, ROOT, wilson
from puaudit_jax.datasets import load_comparisons
from puaudit_jax.judges import OpenAIChatJudge, OpenAILogprobJudge, judge_table
from puaudit_jax.judges.serve import LocalServer, ServeConfig
from puaudit_runtime.files import write_json, write_text


def rate(hits: np.ndarray) -> dict:
    """Share of True in ``hits`` with its Wilson 95 % interval."""
    k, n = int(np.sum(hits)), int(len(hits))
    return {"rate": k / n if n else float("nan"), "ci95": wilson(k, n), "n": n}


def compare(local: pd.DataFrame, served: pd.DataFrame) -> dict:
    """Agreement of two judged copies of the same rows (both with judge_status ok)."""
    both = local.judge_status.eq("ok").values & served.judge_status.eq("ok").values
    lo, se = local[both], served[both]
    ld, sd = [np.array(t["logp_ab"].tolist() + t["logp_ba"].tolist()) for t in (lo, se)]
    return {
        "rows": int(both.sum()),
        "verdict_agreement": rate(lo.judge.values == se.judge.values),
        "order_ab_agreement": rate(lo.verdict_ab.values == se.verdict_ab.values),
        "order_ba_agreement": rate(lo.verdict_ba.values == se.verdict_ba.values),
        "margin_pearson": float(np.corrcoef(lo.margin.astype(float), se.margin.astype(float))[0, 1]),
        "margin_mean_abs_local": float(np.mean(np.abs(lo.margin.astype(float)))),
        "logp_abs_diff_median": float(np.median(np.abs(ld - sd))),
        "logp_abs_diff_p95": float(np.quantile(np.abs(ld - sd), 0.95)),
        "human_agreement_local": rate(lo.judge.values == lo.human.values),
        "human_agreement_served": rate(se.judge.values == se.human.values),
        "consistency_local": rate(lo.consistent.astype(bool).values),
        "consistency_served": rate(se.consistent.astype(bool).values),
    }


def with_logps(table: pd.DataFrame) -> pd.DataFrame:
    """Per-order log p(A, B, C) parsed back from ``judge_text`` (both judges write them there)."""
    import re

    def parse(text):
        nums = re.findall(r"\[([^\]]+)\]", str(text))
        return [[float(x) for x in nums[i].split(",")] for i in (0, 1)] if len(nums) >= 2 else [[np.nan] * 3] * 2

    parsed = [parse(t) for t in table.judge_text]
    return table.assign(logp_ab=[p[0] for p in parsed], logp_ba=[p[1] for p in parsed])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(LOCAL_JUDGE_CSV))
    ap.add_argument("--threads", type=int, default=2, help="server CPU threads")
    ap.add_argument("--port", type=int, default=8765, help="fixed, so cached answers are found again")
    ap.add_argument("--text-pairs", type=int, default=40)
    ap.add_argument("--text-max-tokens", type=int, default=256)
    ap.add_argument("--throughput-pairs", type=int, default=12)
    ap.add_argument("--cache-dir", default=str(RESULTS / "tmp" / "served_cache"))
    ap.add_argument("--out", default=str(RESULTS / "served_judge"))
    args = ap.parse_args(argv)

    local = load_comparisons(args.input)
    local = with_logps(local.reset_index(drop=True))
    config = ServeConfig(port=args.port, threads=args.threads, log=str(RESULTS / "tmp" / "served.log"))
    summary = {"input": str(Path(args.input).relative_to(ROOT)), "server": {}, "threads": args.threads}
    with LocalServer(config) as server:
        summary["server"] = {"base_url": server.base_url, "command": "puaudit serve-local (llama-cpp-python 0.3.36)"}
        judge = OpenAILogprobJudge(server.base_url, config.alias, cache_dir=args.cache_dir, concurrency=1)
        t = time.perf_counter()
        served = with_logps(judge_table(local.drop(columns=["logp_ab", "logp_ba"]), judge, progress=True))
        summary["logprob_seconds"] = time.perf_counter() - t
        summary["logprob_requests"] = dict(judge.client.stats)
        shortened = local.omitted_tokens.fillna(0).astype(int).values > 0
        summary["logprob"] = {
            "all": compare(local, served),
            "same_prompt": compare(local[~shortened], served[~shortened]),
            "local_shortened": compare(local[shortened], served[shortened]),
        }
        print(f"logprob: {summary['logprob']['all']['verdict_agreement']}", file=sys.stderr, flush=True)

        text_rows = local[local.judge_status.eq("ok")].head(args.text_pairs)
        chat = OpenAIChatJudge(
            server.base_url,
            config.alias,
            cache_dir=args.cache_dir,
            concurrency=1,
            params={"max_tokens": args.text_max_tokens},
        )
        t = time.perf_counter()
        text = judge_table(text_rows, chat, both_orders=False, progress=True)  # as measured: one order
        status = text.judge_status.str.split(":").str[0]
        ok = status.eq("ok")
        summary["text"] = {
            "pairs": len(text),
            "max_tokens": args.text_max_tokens,
            "status": status.value_counts().to_dict(),
            "parsed": rate(ok.values),
            "human_agreement_parsed": rate((text.judge[ok] == text.human[ok]).values),
            "agreement_with_logprob_verdict": rate(
                text.judge[ok].values == served.set_index("id").loc[text.id[ok], "judge"].values
            ),
            "seconds": time.perf_counter() - t,
        }

        pairs = local[local.judge_status.eq("ok")].head(args.throughput_pairs)
        summary["throughput"] = []
        for conc in (1, 4, 8):
            j = OpenAILogprobJudge(server.base_url, config.alias, cache_dir=False, concurrency=conc)
            t = time.perf_counter()
            out = judge_table(pairs, j, both_orders=False, progress=False)
            secs = time.perf_counter() - t
            summary["throughput"].append(
                {
                    "concurrency": conc,
                    "pairs": len(pairs),
                    "requests": j.client.stats["requests"],
                    "seconds": secs,
                    "requests_per_s": j.client.stats["requests"] / secs,
                    "seconds_per_pair": secs / len(pairs),
                    "ok": int(out.judge_status.eq("ok").sum()),
                }
            )
            print(f"concurrency {conc}: {summary['throughput'][-1]}", file=sys.stderr, flush=True)
    write_json(summary, Path(args.out + ".json"))
    write_text(render(summary), Path(args.out + ".md"))
    print(render(summary))
    return 0


def _r(x: dict) -> str:
    if not x["n"]:
        return "- (n = 0)"
    lo, hi = x["ci95"]
    return f"{100 * x['rate']:.1f} % ({100 * lo:.1f}-{100 * hi:.1f}, n = {x['n']})"


def render(s: dict) -> str:
    lines = [
        "# The judge through llama.cpp's server vs in process",
        "",
        f"Server: {s['server'].get('command')}, {s['threads']} threads, SmolLM2-135M-Instruct Q4_1. "
        f"Rows: `{s['input']}`.",
        "",
        "| logprob verdicts | all rows | same prompt | local prompt shortened |",
        "|---|---|---|---|",
    ]
    parts = [s["logprob"][k] for k in ("all", "same_prompt", "local_shortened")]
    for key, label in [
        ("verdict_agreement", "served = local (final verdict)"),
        ("order_ab_agreement", "served = local, order (A, B)"),
        ("order_ba_agreement", "served = local, order (B, A)"),
        ("human_agreement_local", "local = experts"),
        ("human_agreement_served", "served = experts"),
        ("consistency_local", "position consistency, local"),
        ("consistency_served", "position consistency, served"),
    ]:
        lines.append(f"| {label} | " + " | ".join(_r(p[key]) if p["rows"] else "-" for p in parts) + " |")
    for key, label in [
        ("margin_pearson", "margin correlation"),
        ("margin_mean_abs_local", "mean abs(margin), local (nats)"),
        ("logp_abs_diff_median", "median abs(delta log p) per letter (nats)"),
        ("logp_abs_diff_p95", "95th pct abs(delta log p) (nats)"),
    ]:
        lines.append(f"| {label} | " + " | ".join(f"{p[key]:.3f}" if p["rows"] else "-" for p in parts) + " |")
    t = s["text"]
    lines += [
        "",
        f"Text verdicts (chat endpoint, max_tokens {t['max_tokens']}) on {t['pairs']} pairs: status {t['status']}; "
        f"parsed {_r(t['parsed'])}; agreement with experts where parsed {_r(t['human_agreement_parsed'])}; "
        f"with the logprob verdict {_r(t['agreement_with_logprob_verdict'])}; {t['seconds']:.0f} s.",
        "",
        "| concurrency | pairs | requests | requests/s | s per pair |",
        "|---|---|---|---|---|",
    ]
    for r in s["throughput"]:
        lines.append(
            f"| {r['concurrency']} | {r['pairs']} | {r['requests']} | {r['requests_per_s']:.2f} "
            f"| {r['seconds_per_pair']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
