"""The ``puaudit`` command: its parser, made of every command's sub-parser, and the dispatch.

    audit      the unlabelled judge verdicts of DATA              (cli/audit.py)
    evaluate   the paper's protocol on hidden labels               (cli/evaluate.py)
    demo       the protocol on MT-Bench, end to end               (cli/evaluate.py)
    quantify   estimates with intervals, PPI++                    (cli/quantify.py)
    plan-labels  which items to label next (active sampling)      (cli/plan.py)
    monitor    a judge's agreement as labels arrive, with alarm   (cli/monitor.py)
    attack     attack the judge's losers and re-judge             (cli/judges.py)
    judge      re-judge every comparison                          (cli/judges.py)
    serve-local  llama.cpp's OpenAI-compatible server             (cli/judges.py)
    consensus  UDA: score matrices and consensus alignment        (cli/consensus.py)
    probe      BoRP regression probes                             (cli/probe.py)

DATA is a comparison file (jsonl / csv / parquet; see :mod:`puaudit_jax.datasets.comparisons`) or a
bundled set: ``mtbench``, ``llmfao-gpt4``, ``llmfao-gpt3``. User errors -- a bad option value
(argparse's included), file, row or folder, a full disk (naming --out and the file) -- print one line
``error: ...`` on stderr and exit with status 2; ``--debug`` anywhere on the line shows the traceback
instead. Ctrl-C prints ``interrupted`` and exits with status 130 (the traceback too with ``--debug``); one
Ctrl-C is enough, also where a library swallows the first KeyboardInterrupt
(:mod:`puaudit_jax.cli.interrupts`). Compiled programs are kept under ``$PUAUDIT_CACHE/jax``
(:func:`puaudit_runtime.cache.enable_compilation_cache`) unless JAX's own compilation cache is set.

Building the parser imports no numerical library (JAX, scipy, pandas, numpy, ...): the sub-parsers
read the light config modules, and each command imports what it computes with when it runs, so
``puaudit --help`` is quick (``tests/cli/test_lazy.py``).
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import signal
import sys
import zipfile

from puaudit_runtime.cache import enable_compilation_cache

from .._version import __version__
from . import interrupts
from .audit import add_audit_parser
from .consensus import add_consensus_parser
from .convert import add_convert_parser
from .evaluate import add_demo_parser, add_evaluate_parser
from .judges import add_attack_parsers
from .monitor import add_monitor_parser
from .plan import add_plan_parser
from .probe import add_probe_parser
from .quantify import add_quantify_parser
from .run_folder import STAGING

# What a bad file, option or folder can raise; anything else is a bug and keeps its traceback.
USER_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile)
INTERRUPTED = 130  # 128 + SIGINT, the shell's status of a command ended by Ctrl-C
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # as puaudit_runtime.files.DISK_FULL (which imports numpy: not here)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors read ``error: ...`` like every other user error of ``puaudit``.

    Its sub-parsers are of this class too (argparse makes them with the parent's class).
    """

    def error(self, message: str):
        """Print ``error: PROG: MESSAGE`` and where the usage is, then exit with status 2."""
        self.exit(2, f"error: {self.prog}: {message}\n(usage: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``puaudit`` parser with every command."""
    parser = Parser(
        prog="puaudit",
        description="Audit LLM-judge verdicts with partial OT "
        "(PUAudit) and evaluate the audit against hidden human labels.",
    )
    parser.add_argument("--version", action="version", version=f"puaudit {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True)
    add_audit_parser(sub)
    add_evaluate_parser(sub)
    add_demo_parser(sub)
    add_quantify_parser(sub)
    add_plan_parser(sub)
    add_monitor_parser(sub)
    add_attack_parsers(sub)
    add_consensus_parser(sub)
    add_probe_parser(sub)
    add_convert_parser(sub)
    return parser


class CommandError(SystemExit):
    """A user error: its message is printed on stderr and the process exits with status 2."""

    def __init__(self, message: str):
        """Exit status 2 with ``message``."""
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        """The message."""
        return self.message


def main(argv: list[str] | None = None) -> int:
    """Run a command.

    Args:
        argv: the arguments after ``puaudit`` (default: ``sys.argv[1:]``: the process is the
            ``puaudit`` program).

    Returns:
        The command's exit status: 0 when it did its job; 1 when a ``judge`` or ``attack`` run had
        more failed requests than ``--max-failures`` allows (its files are written first).

    Raises:
        CommandError: a user error (``error: ...`` naming the file, row, column or option, printed
            on stderr; exit status 2). ``--debug`` anywhere on the line raises the error itself.
        SystemExit: 130 after Ctrl-C when ``argv`` is given (a caller's process is left to it); as
            the program (``argv`` None) the process ends with status 130 at once instead, skipping
            the interpreter's teardown, where JAX's threads could crash it.
    """
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if program:
        interrupts.install()  # a Ctrl-C that JAX swallows is raised again
    try:
        return _run(argv, debug)
    except KeyboardInterrupt:  # output folder locks and temporary files were released while unwinding
        interrupts.received()
        _interrupted(debug, program)
        raise SystemExit(INTERRUPTED) from None


def _run(argv: list[str], debug: bool) -> int:
    """Parse ``argv`` and run its command; a user error becomes :class:`CommandError` (see :func:`main`)."""
    recorded = argparse.Namespace(argv=["puaudit", *argv])  # the command line, for the run folder's manifest
    args = build_parser().parse_args([a for a in argv if a != "--debug"], namespace=recorded)
    enable_compilation_cache()  # a second run of a command compiles nothing (puaudit_runtime.cache)
    try:
        return args.func(args)
    except SystemExit as err:  # a command's own "error: ..." exit
        if isinstance(err, CommandError) or not isinstance(err.code, str):
            raise
        message = err.code if err.code.startswith("error:") else f"error: {err.code}"
    except USER_ERRORS as err:
        if debug:
            raise
        message = f"error: {_disk_full(err, getattr(args, 'out', None)) or err}"
    print(message, file=sys.stderr)
    raise CommandError(message)


def _disk_full(err: BaseException, out: str | None) -> str:
    """The line for a write that found the disk full, naming --out and the file at its final place; else ''.

    Args:
        err: the error a command raised.
        out: the command's --out, if it has one.
    """
    if not isinstance(err, OSError) or err.errno not in DISK_FULL:
        return ""
    where = re.sub(rf"{re.escape(os.sep)}{re.escape(STAGING)}\d+(?={re.escape(os.sep)})", "", str(err.filename or ""))
    return (("" if out is None else f"--out {out}: ") + "the disk is full (no space left on device)"
            + (f" writing {where}" if where else "") + "; free some space there or choose another --out")  # fmt: skip


def _interrupted(debug: bool, program: bool) -> None:
    """Say ``interrupted`` (after the traceback with ``debug``); as the program, end the process with 130."""
    if program:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C cannot interrupt the way out
    if debug:
        import traceback

        traceback.print_exc()
    _say("interrupted")
    if program:
        os._exit(INTERRUPTED)


def _say(line: str) -> None:
    """``line`` on stderr, stdout and stderr flushed (a closed stream is left alone)."""
    for stream, text in ((sys.stdout, None), (sys.stderr, line)):
        try:
            if text is not None:
                print(text, file=stream)
            stream.flush()
        except (OSError, ValueError):
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
