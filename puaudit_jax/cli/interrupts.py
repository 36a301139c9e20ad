"""Ctrl-C for the ``puaudit`` program: a KeyboardInterrupt, raised again until the command has it.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. Where
that is a garbage-collector callback (JAX's ``_xla_gc_callback`` runs at every collection), a
finaliser or a bare ``except:`` (JAX's tracing path has several), the exception is swallowed, with
an "Exception ignored" traceback at best, and the command runs on to its end with exit status 0 as
if Ctrl-C had never come (1 in 3 or 4 interrupted audits under a loaded test suite). The program's
handler therefore raises the interrupt again every :data:`REDELIVER_S` seconds until
:func:`received` says a handler has it, and a swallowed KeyboardInterrupt is not reported; once
received, Ctrl-C is ignored, so the way out (locks released, a server stopped) is not interrupted.

Only the program installs it (:func:`puaudit_jax.cli.main.main` with no arguments): a caller of
``main(argv)`` keeps its own SIGINT handler.
"""

from __future__ import annotations

import signal
import sys
import threading

REDELIVER_S = 1.0  # seconds between deliveries of one Ctrl-C until a handler has it

_received = threading.Event()  # set once a handler has the interrupt (until the next install)
_redelivering = threading.Event()  # set while a thread raises the interrupt again


def install() -> None:
    """Make SIGINT raise a KeyboardInterrupt that is delivered again until :func:`received`."""
    _received.clear()
    signal.signal(signal.SIGINT, _on_sigint)
    sys.unraisablehook = _unraisable


def received() -> None:
    """Say that a handler has the KeyboardInterrupt: no more deliveries, later Ctrl-C ignored."""
    _received.set()


def _on_sigint(signum, frame) -> None:
    if _received.is_set():  # the way out is under way (a late redelivery, or a second Ctrl-C)
        return
    if not _redelivering.is_set():
        _redelivering.set()
        threading.Thread(target=_redeliver, name="puaudit-ctrl-c", daemon=True).start()
    raise KeyboardInterrupt


def _unraisable(unraisable) -> None:
    """A KeyboardInterrupt swallowed by a callback or finaliser goes unreported (it comes again)."""
    if not issubclass(unraisable.exc_type, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def _redeliver() -> None:
    """Raise the interrupt in the main thread again every REDELIVER_S until it is received."""
    main = threading.main_thread().ident
    try:
        while not _received.wait(REDELIVER_S):
            signal.pthread_kill(main, signal.SIGINT)  # to the main thread: a blocking call there is interrupted too
    finally:
        _redelivering.clear()
