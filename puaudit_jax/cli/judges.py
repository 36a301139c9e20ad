"""Command line of the attack-judge protocol: ``puaudit attack``, ``judge`` and ``serve-local``.

    puaudit attack DATA --judge local|openai --attack distraction|length|sentiment [--emotion E]
                   [--limit N] [--base-url URL --model NAME] [--generator local|openai] --out DIR
    puaudit judge DATA --judge local|openai [--verdict text|logprob] [--limit N] --out DIR
    puaudit serve-local [--model smollm2] [--port 8765] [--n-ctx 8192]

attack (seed Algorithm 2, Phase 2): the judge's verdict on each clean pair (``--original rejudge``,
default; or the table's ``judge`` column with ``--original column``), the loser attacked, the
pair re-judged. Writes ``DIR/attacked.csv`` (one row per input id: id, question_type, human,
original, original_status, loser, attacked, attacked_status, attacked_text, flipped, to_loser,
status, reason), ``DIR/comparisons.csv`` (a comparison table whose ``judge`` column is the attacked
verdict, loser text replaced: ``puaudit evaluate DIR/comparisons.csv`` runs on it) and
``DIR/attack.json`` (counts, flip-under-attack rate overall and per question type, settings).

judge (Algorithm 2, Phase 1): re-judges every comparison; writes ``DIR/comparisons.csv`` (``judge``
= the new verdict, ``judge_original`` = the old one, plus judge_status, verdict_ab, verdict_ba,
margin, consistent for the local judge) and ``DIR/judge.json`` (status counts, agreement with the
human verdicts where present).

DATA is a comparison file or a bundled set name (``mtbench``, ``llmfao-gpt4``, ``llmfao-gpt3``).
``--judge openai`` needs ``--base-url`` (e.g. http://127.0.0.1:8000/v1) and ``--model``; the API
key is read from ``$OPENAI_API_KEY`` (``--api-key-env`` names another variable). ``--verdict
text`` (default) parses the judge's written ``[[A]]/[[B]]/[[C]]``; ``--verdict logprob`` takes the
local judge's rule (log p("A") vs log p("B") after ``[[``, both orders) from the completions
endpoint's ``top_logprobs``, the prompt rendered with ``--chat-template`` (the served model's
template: a model name or folder; default smollm2). Failed requests are rows with an ``error``
status (printed with their ids) and ``judge = "missing"`` (never a tie); answered requests are
cached, so rerunning resumes. The base URL must be http(s) with a host; ``--limit`` >= 1,
``--timeout`` > 0, ``--concurrency`` >= 1 and ``--max-retries`` >= 0 (errors name the option).

Exit status of judge and attack: 0 when the command did its job; 1 when every pair sent failed, or
more than ``--max-failures`` of them (a fraction, default 0.2; 0 allows none) -- the files are
written first, so the work is not lost, then one line ``error: N of M pairs failed (first error:
...)``; 2 for a user error (a bad option, file or folder). The output folder is locked while a run
writes it (a second run on the same ``--out`` is refused) and gets a ``manifest.json``
(:class:`~.run_folder.RunFolder`).

serve-local: llama.cpp's OpenAI-compatible server (the ``serve`` extra) on 127.0.0.1 serving a
GGUF model (default the bundled SmolLM2-135M-Instruct), in the foreground until Ctrl-C.
Every file is written atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from puaudit_runtime.checks import check_fraction, check_int, check_real

from ..judges.names import API_KEY_ENV
from . import interrupts
from .inputs import add_read_options, load_data, read_config
from .requests import JudgeRequest, JudgeSettings, judge_request, serve_config
from .run_folder import RunFolder, wrote

FAILED_RUN = 1
"""Exit status of a judge or attack run with too many failed pairs (files written; 2 is a user error)."""


def _parsed(text: str, kind, check, *args, **kwargs):
    """``check("", kind(text), *args, **kwargs)``, its ValueError as argparse's error (naming the option).

    Text that is no ``kind`` is checked as it is, and refused as the string it is.
    """
    try:
        value = kind(text)
    except ValueError:
        value = text
    try:
        return check("", value, *args, **kwargs)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _number(kind, low: float, strict: bool = False, note: str = ""):
    """An argparse type: ``kind`` of the text, ``>= low`` (``> low`` when strict; finite); ``note`` explains it."""
    if kind is int:
        return lambda text: _parsed(text, int, check_int, int(low), what=note)
    return lambda text: _parsed(text, float, check_real, low, strict=strict, what=note)


def _fraction(text: str) -> float:
    """An argparse type: a fraction in [0, 1]."""
    return _parsed(text, float, check_fraction, "[]", what="0: no failure allowed")


def check_options(settings: JudgeSettings) -> None:
    """What can be checked before loading data or a model: --judge openai's --base-url and --model.

    The base URLs (--base-url, --gen-base-url) must be http(s) URLs with a host (ValueError naming them).
    """
    from ..judges.openai_chat import check_base_url

    if settings.judge == "openai" and (not settings.base_url or not settings.model):
        raise SystemExit("error: --judge openai needs --base-url and --model")
    if settings.api_key_env != API_KEY_ENV and not os.environ.get(settings.api_key_env):
        raise ValueError(f"--api-key-env {settings.api_key_env}: that environment variable is not set (or empty); set "
                         f"it, or leave --api-key-env out (${API_KEY_ENV}: optional)")  # fmt: skip
    for option in ("base_url", "gen_base_url"):
        if getattr(settings, option, None):
            check_base_url(getattr(settings, option), "--" + option.replace("_", "-"))


def make_judge(settings: JudgeSettings):
    """The judge the parsed arguments name: a local judge, or an OpenAI-compatible text / logprob judge."""
    if settings.judge == "local":
        from ..judges.local import LocalJudge

        return LocalJudge(
            settings.model or "smollm2",
            max_length=settings.max_length,
            cache_dir=settings.cache_dir,
            predict_type=settings.predict_type,
        )
    check_options(settings)
    from ..judges import OpenAIChatJudge, OpenAILogprobJudge

    client = _client_options(settings)
    if settings.verdict == "logprob":
        return OpenAILogprobJudge(
            settings.base_url,
            settings.model,
            chat_template=settings.chat_template,
            top_logprobs=settings.top_logprobs,
            **client,
        )
    return OpenAIChatJudge(settings.base_url, settings.model, **client)


def make_generator(settings: JudgeSettings, judge):
    """The rewrite model of the attacks: local (sharing ``judge``'s model when it is the same) or served."""
    kind = settings.generator or settings.judge
    if kind == "local":
        from ..judges.local import LocalGenerator

        name = settings.gen_model or (settings.model if settings.judge == "local" else None) or "smollm2"
        same = getattr(judge, "name", None) == f"local:{name}"
        return LocalGenerator(
            name, pre=judge.pre if same else None, max_new_tokens=settings.max_new_tokens, cache_dir=settings.cache_dir
        )
    base, model = settings.gen_base_url or settings.base_url, settings.gen_model or settings.model
    if not base or not model:
        raise SystemExit("error: --generator openai needs --gen-base-url/--gen-model (or --base-url/--model)")
    from ..judges import OpenAIChatGenerator

    return OpenAIChatGenerator(base, model, max_tokens=settings.max_new_tokens, **_client_options(settings))


def _client_options(settings: JudgeSettings) -> dict:
    """The HTTP client's settings of the command line (:func:`_client_arguments`), for a judge or a generator."""
    return {"api_key_env": settings.api_key_env, "timeout": settings.timeout, "concurrency": settings.concurrency,
            "max_retries": settings.max_retries, "cache_dir": settings.cache_dir}  # fmt: skip


def _client_arguments(p: argparse.ArgumentParser) -> None:
    """The HTTP client's options and --max-failures (checked at parse time: errors name the option)."""
    p.add_argument(
        "--api-key-env",
        default=API_KEY_ENV,
        help=f"environment variable holding the API key (default {API_KEY_ENV}, optional: local servers need none; "
        "another name must be set)",
    )
    p.add_argument(
        "--timeout", type=_number(float, 0, strict=True), default=120.0, help="seconds per HTTP request (> 0)"
    )
    p.add_argument("--concurrency", type=_number(int, 1), default=4, help="parallel HTTP requests (>= 1)")
    p.add_argument(
        "--max-retries",
        type=_number(int, 0),
        default=4,
        help="extra attempts of a request after a transient failure (timeout, 408, 429, 5xx, connection)",
    )
    p.add_argument(
        "--max-failures",
        type=_fraction,
        default=0.2,
        help="the largest fraction of pairs whose requests may fail before the run exits with status 1 "
        "(files written first; default 0.2; 0: none may fail; a run where every pair failed always exits 1)",
    )


def _judge_arguments(p: argparse.ArgumentParser) -> None:
    add_read_options(p)
    p.add_argument(
        "--judge",
        choices=["local", "openai"],
        default="local",
        help="local: the in-process Flax model; openai: an OpenAI-compatible server (--base-url)",
    )
    p.add_argument("--model", help="local: model name or folder (default smollm2); openai: the served model name")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    _client_arguments(p)
    p.add_argument(
        "--verdict",
        choices=["text", "logprob"],
        default="text",
        help="openai judge: parse the written [[A]]/[[B]]/[[C]], or log p(A) vs log p(B) after [[ (both orders)",
    )
    p.add_argument(
        "--chat-template",
        default="smollm2",
        help="--verdict logprob: model name or folder whose chat template renders the prompt",
    )
    p.add_argument(
        "--top-logprobs", type=_number(int, 1), default=20, help="--verdict logprob: tokens returned per position"
    )
    p.add_argument(
        "--max-length", type=_number(int, 1), help="local judge prompt cap in tokens (middle-out above; default window)"
    )
    p.add_argument(
        "--predict-type",
        action="store_true",
        help="local judge: also score the paper's [[TYPE:X]] "
        "question type (one more forward pass per pair; served judges write it in their answer)",
    )
    p.add_argument(
        "--cache-dir", help="response cache folder (default $PUAUDIT_CACHE/judges or ~/.cache/puaudit/judges)"
    )
    p.add_argument("--limit", type=_number(int, 1, note="omit it for every row"), help="only the first N comparisons")
    p.add_argument(
        "--single-order",
        action="store_true",
        help="judge: one order only (a text judge is otherwise called twice per pair, the second time with the "
        "responses swapped, for judge_swapped; the local and logprob judges read both orders in one call)",
    )
    p.add_argument(
        "--include-unlabelled",
        action="store_true",
        default=None,
        help="bundled sets: also judge the judge-only comparisons",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (the judged table, judge.json, manifest.json; responses are cached in --cache-dir)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_attack_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``puaudit attack``."""
    _judge_arguments(p)
    p.add_argument(
        "--attack",
        choices=["distraction", "length", "sentiment"],
        required=True,
        help="what is done to the judge's loser (Algorithm 2)",
    )
    p.add_argument("--emotion", default="cheerful", help="sentiment attack tone (seed Figure 9's {emotion})")
    p.add_argument(
        "--generator",
        choices=["local", "openai"],
        help="rewrite model for length/sentiment (default: same kind as --judge)",
    )
    p.add_argument("--gen-base-url", help="the rewrite model's OpenAI-compatible endpoint (default: --base-url)")
    p.add_argument(
        "--gen-model", help="the rewrite model (local: name or folder; openai: the served name; default: --model)"
    )
    p.add_argument("--max-new-tokens", type=_number(int, 1), default=512, help="rewrite length cap in tokens")
    p.add_argument(
        "--original",
        choices=["rejudge", "column"],
        default="rejudge",
        help="verdicts before the attack: the same judge on the clean pairs, or the table's judge column",
    )


def add_judge_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``puaudit judge``."""
    _judge_arguments(p)


def _out_folder(request: JudgeRequest) -> RunFolder:
    """The locked output folder of --out (lock and manifest.json: :class:`~.run_folder.RunFolder`)."""
    return RunFolder(request.output.out, list(request.output.argv))


def _exit_status(failures, max_failures: float) -> int:
    """0, or :data:`FAILED_RUN` after one ``error: N of M pairs failed`` line when they are too many."""
    if not failures.too_many(max_failures):
        return 0
    print(f"error: {failures.message()}", file=sys.stderr)
    return FAILED_RUN


def cmd_attack(args) -> int:
    """``puaudit attack``: the request read from the command line (:func:`~.requests.judge_request`), then run."""
    return run_attack_command(judge_request(args))


def _table(request: JudgeRequest):
    """DATA's first ``limit`` rows, read as its options say."""
    data = request.data
    return load_data(list(data.files), data.include_unlabelled, request.limit, read=read_config(data))


def run_attack_command(request: JudgeRequest) -> int:
    """The judge's verdicts, the losers attacked, the pairs re-judged."""
    from ..judges import Verdict
    from ..judges.attacks import attack_failures, attack_report, get_attack, run_attack, write_attack

    settings, output = request.judge, request.output
    check_options(settings)
    table = _table(request)
    attack = get_attack(request.attack, **({"emotion": request.emotion} if request.attack == "sentiment" else {}))
    with _out_folder(request) as run:
        t0 = time.perf_counter()
        judge = make_judge(settings)
        generator = make_generator(settings, judge) if attack.needs_generator else None
        original = None
        if request.original == "column":
            original = {str(r.id): Verdict(r.judge, None, "table judge column", "ok") for r in table.itertuples()}
        res = run_attack(table, judge, attack, generator, original=original, progress=not output.quiet)
        report = attack_report(res, data=request.data.name, generator=getattr(generator, "name", None),
                               original=request.original, seconds=time.perf_counter() - t0)  # fmt: skip
        files = write_attack(res, table, report, run.path)
        run.finish(files)
    print(report.summary())
    print(wrote(output.out, files))
    return _exit_status(attack_failures(res, rejudged=original is None), request.max_failures)


def _print_errors(report) -> None:
    """The first failed pairs of a judge run, and how many there are (stderr)."""
    for r in report.errors[:5]:
        print(f"  pair {r['id']}: {r['status']}", file=sys.stderr)
    if report.errors:  # one entry per failed order: a pair may fail in both
        more = f" ({len(report.errors) - 5} more in judge.json)" if len(report.errors) > 5 else ""
        pairs = len({r["id"] for r in report.errors})
        print(
            f"{len(report.errors)} judgements failed{more}, on {pairs} pairs (each order counts; those verdicts are "
            "missing); "
            "answered requests are cached: rerun the same command to resume",
            file=sys.stderr,
        )


def cmd_judge(args) -> int:
    """``puaudit judge``: the request read from the command line (:func:`~.requests.judge_request`), then run."""
    return run_judge_command(judge_request(args))


def run_judge_command(request: JudgeRequest) -> int:
    """Every comparison re-judged."""
    from ..judges import judge_table
    from ..judges.run import judge_failures, judge_report, write_judging

    check_options(request.judge)
    table = _table(request)
    with _out_folder(request) as run:
        t0 = time.perf_counter()
        judge = make_judge(request.judge)
        result = judge_table(table, judge, both_orders=not request.single_order, progress=not request.output.quiet)
        report = judge_report(result, judge.name, request.data.name, time.perf_counter() - t0)
        files = write_judging(result, report, run.path)
        run.finish(files)
    print(report.summary())
    _print_errors(report)
    print(wrote(request.output.out, files))
    return _exit_status(judge_failures(result), request.max_failures)


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``puaudit serve-local``: the fields of :class:`~.judges.serve.ServeConfig`."""
    from ..judges.serve import ServeConfig
    from .options import add_options

    add_options(p, ServeConfig)


def cmd_serve(args) -> int:
    """``puaudit serve-local``: the settings read from the command line (:func:`~.requests.serve_config`), then run."""
    return run_serve(serve_config(args))


def run_serve(config) -> int:
    """Run llama.cpp's server with ``config`` (a ``ServeConfig``) until it exits (1) or Ctrl-C / SIGTERM (0)."""
    import signal

    from ..judges.serve import LocalServer

    server = LocalServer(config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` ends it as Ctrl-C does
    try:  # from the start: a Ctrl-C just after the line below (or while starting) stops the server too
        try:
            server.start()
        except (RuntimeError, TimeoutError, FileNotFoundError) as err:
            raise SystemExit(f"error: {err}") from None
        print(f"serving {config.model} as {config.alias!r} on {server.base_url} (log {server.log_path}); "
              "Ctrl-C stops")  # fmt: skip
        sys.stdout.flush()
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
        code = server.process.returncode if server.process is not None else 0
        print(f"the server exited with code {code}:\n{server.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        interrupts.received()  # the server is stopped without a second interrupt
        return 0
    finally:
        server.stop()


def add_attack_parsers(sub) -> None:
    """Register ``attack``, ``judge`` and ``serve-local`` on a subparsers object."""
    p = sub.add_parser("attack", help="attack the judge's losers and re-judge (seed Algorithm 2)")
    add_attack_arguments(p)
    p.set_defaults(func=cmd_attack)
    p = sub.add_parser("judge", help="re-judge every comparison with a local or OpenAI-compatible judge")
    add_judge_arguments(p)
    p.set_defaults(func=cmd_judge)
    p = sub.add_parser("serve-local", help="llama.cpp's OpenAI-compatible server on 127.0.0.1 (the serve extra)")
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)
