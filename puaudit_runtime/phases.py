"""Where a call's time goes: named phases, timed only while a caller records them.

    with phases.recording() as table:
        solve_partial(x, y, 0.7)
    print(table.to_text())          # validation 0.004 s, transfer 0.010 s, ..., host copies 0.002 s

Library code marks its phases with :func:`phase`; outside :func:`recording` that is a plain call
(no synchronisation, no clock read), so JAX's asynchronous dispatch is untouched. While recording,
each phase waits for its outputs (``jax.block_until_ready``): the seconds are the phase's own, and
the whole call is a little slower than unrecorded (one synchronisation per phase).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Callable, Iterator

__all__ = ["PhaseTable", "is_recording", "phase", "recording"]

_TABLE: contextvars.ContextVar[PhaseTable | None] = contextvars.ContextVar("puaudit_phases", default=None)


@dataclasses.dataclass
class PhaseTable:
    """Seconds per phase, in the order the phases first ran (a phase run twice adds up).

    Attributes:
        seconds: phase name -> wall-clock seconds, summed over its runs.
        calls: phase name -> how many times it ran.
    """

    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` of wall-clock time to phase ``name`` (and one call)."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    @property
    def total(self) -> float:
        """The recorded phases' seconds, summed."""
        return sum(self.seconds.values())

    def shares(self) -> dict[str, float]:
        """Phase name -> its share of :attr:`total`, in [0, 1] (empty for an empty table)."""
        total = self.total
        return {name: s / total for name, s in self.seconds.items()} if total > 0 else {}

    def to_text(self) -> str:
        """One line per phase: name, milliseconds, share of the total."""
        shares = self.shares()
        return "\n".join(f"{name:<14} {1e3 * s:10.2f} ms {100 * shares.get(name, 0):6.1f} %"
                         for name, s in self.seconds.items())  # fmt: skip


@contextlib.contextmanager
def recording() -> Iterator[PhaseTable]:
    """Record the phases of the calls made inside the block into the :class:`PhaseTable` it yields.

    Nested recordings each get their own table (the innermost records).
    """
    table = PhaseTable()
    token = _TABLE.set(table)
    try:
        yield table
    finally:
        _TABLE.reset(token)


def is_recording() -> bool:
    """Whether a :func:`recording` block is open in this context."""
    return _TABLE.get() is not None


def phase(name: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, timed as phase ``name`` when a :func:`recording` block is open.

    Args:
        name: the phase's name in the table (e.g. "validation", "iterations", "host copies").
        fn: the work of the phase; its outputs (any pytree) are waited for before the clock stops.
        *args: positional arguments of ``fn``.
        **kwargs: keyword arguments of ``fn``.

    Returns:
        What ``fn`` returns.
    """
    table = _TABLE.get()
    if table is None:
        return fn(*args, **kwargs)
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    table.add(name, time.perf_counter() - start)
    return out
