"""Bytes that a compiled SPMD program exchanges between devices, read from its HLO text.

A sharded program's communication is its collectives (all-reduce, all-gather, ...). Counted from
the compiled, SPMD-partitioned (per-device) HLO module, where each sits in the loop structure::

    loop_traffic(text) -> {loop id: LoopTraffic}   every collective attributed to its loop; loop 0
                                                   is the entry computation (once per call)
    comm_summary(text) -> CommSummary              per iteration of the innermost loop with
                                                   collectives (a solver's iteration), its
                                                   fallback branches, per enclosing loop, once

The call graph is walked from the entry computation: a ``while`` opens a loop (its body and
condition run once per trip), a ``conditional``'s branches are counted apart (they run only when
taken: a solver's stable fallbacks), other calls inherit their caller's place. Bytes are each
collective's result shape per device (an all-reduce's payload; a ring all-reduce of B bytes sends
about 2 B (D - 1) / D).

Usage::

    text = jax.jit(f).lower(*args).compile().as_text()
    comm_summary(text).per_iter      # bytes per device per solver iteration
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = ["CommSummary", "LoopTraffic", "comm_summary", "loop_traffic"]

COLLECTIVES = frozenset(
    {
        "all-reduce",
        "all-reduce-start",
        "all-gather",
        "all-gather-start",
        "reduce-scatter",
        "collective-permute",
        "collective-permute-start",
        "all-to-all",
        "collective-broadcast",
    }
)
_DTYPE_BYTES = dict(
    pred=1, s8=1, u8=1, s16=2, u16=2, f16=2, bf16=2, s32=4, u32=4, f32=4, s64=8, u64=8, f64=8, c64=8, c128=16
)
_SHAPE = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([\d,]*)\]")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s*(.*)$")
_CALLED = re.compile(r"\b(body|condition|calls|true_computation|false_computation)=%?([^\s,}]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


@dataclass
class LoopTraffic:
    """The collectives of one loop (or of the entry computation, loop 0), per trip.

    Attributes:
        parent: id of the enclosing loop (None for the entry).
        depth: loops around it (0 for the entry).
        direct_bytes / direct_ops / direct_multi: bytes per device, operations, and operations on
            more than one element, on the loop's straight path.
        branch_bytes / branch_ops / branch_multi: the same inside conditional branches.
        groups: devices per replica group of its collectives (sorted, distinct).
    """

    parent: int | None
    depth: int
    direct_bytes: int = 0
    direct_ops: int = 0
    direct_multi: int = 0
    branch_bytes: int = 0
    branch_ops: int = 0
    branch_multi: int = 0
    groups: list[int] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """Straight-path and branch bytes together."""
        return self.direct_bytes + self.branch_bytes

    def add(self, shape: str, attrs: str, in_branch: bool) -> None:
        """Count one collective of result ``shape`` (HLO text) with attributes ``attrs``.

        Args:
            shape: the collective's result shape in HLO text (``f32[128,4]``; a tuple sums its parts).
            attrs: the rest of its HLO line (its ``replica_groups`` give the group size).
            in_branch: whether it sits inside a conditional branch (counted in ``branch_*``, else ``direct_*``).
        """
        key = "branch" if in_branch else "direct"
        setattr(self, f"{key}_bytes", getattr(self, f"{key}_bytes") + shape_bytes(shape))
        setattr(self, f"{key}_ops", getattr(self, f"{key}_ops") + 1)
        setattr(self, f"{key}_multi", getattr(self, f"{key}_multi") + (shape_elements(shape) > 1))
        size = group_size(attrs)
        if size is not None and size not in self.groups:
            self.groups = sorted([*self.groups, size])


@dataclass(frozen=True)
class CommSummary:
    """Bytes per device of a solver-like program, by how often they are sent.

    Attributes:
        per_iter: bytes per trip of the innermost loop with collectives (the iteration).
        per_iter_ops / per_iter_multi: its collectives, and those on more than one element.
        per_iter_fallback: bytes in its conditional branches and inner loops (taken rarely).
        per_epoch: bytes per trip of the enclosing loops (e.g. a kernel rebuild per epoch).
        once: bytes of the entry computation (once per call).
        depth: nesting depth of the iteration loop (0 when no loop has collectives).
        loops: number of loops in the program.
        groups: devices per replica group in the iteration loop.
    """

    per_iter: int
    per_iter_ops: int
    per_iter_multi: int
    per_iter_fallback: int
    per_epoch: int
    once: int
    depth: int
    loops: int
    groups: tuple[int, ...] = ()


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape, e.g. ``f32[128,4]`` -> 2048; a tuple shape sums its parts."""
    total = 0
    for dtype, dims in _SHAPE.findall(shape):
        total += math.prod(int(v) for v in filter(None, dims.split(","))) * _DTYPE_BYTES[dtype]
    return total


def shape_elements(shape: str) -> int:
    """Elements of a (possibly tuple) HLO shape: a tuple of two scalars counts 2."""
    return sum(math.prod(int(v) for v in filter(None, dims.split(","))) for _, dims in _SHAPE.findall(shape))


def group_size(attrs: str) -> int | None:
    """Devices per replica group of a collective: ``{{0,1},{2,3}}`` or the iota form ``[2,2]<=[4]``."""
    g = re.search(r"replica_groups=\{\{([\d,]*)\}", attrs)
    if g:
        return len(g.group(1).split(","))
    g = re.search(r"replica_groups=\[([\d,]+)\]<=", attrs)
    return int(g.group(1).split(",")[-1]) if g else None


def split_instruction(rhs: str) -> tuple[str, str, str]:
    """``'shape opcode(operands), attrs'`` -> (shape, opcode, rest); a tuple shape is parenthesised."""
    rhs = rhs.strip()
    if rhs.startswith("("):
        depth, end = 0, len(rhs) - 1
        for i, ch in enumerate(rhs):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                end = i
                break
        shape, rest = rhs[: end + 1], rhs[end + 1 :].lstrip()
    else:
        shape, _, rest = rhs.partition(" ")
    opcode, _, rest = rest.partition("(")
    return shape, opcode.strip(), rest


def computations(text: str) -> tuple[dict[str, list[tuple[str, str, str]]], str | None]:
    """The HLO module's computations: ({name: [(shape, opcode, rest) per instruction]}, entry name)."""
    comps: dict[str, list] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header and not line.startswith(" "):
                current = header.group(2)
                comps[current] = []
                entry = current if header.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif instruction := _INSTR.match(line):
            comps[current].append(split_instruction(instruction.group(2)))
    return comps, entry


def _called(rest: str) -> dict[str, list[str]]:
    called: dict[str, list[str]] = {}
    for kind, name in _CALLED.findall(rest):
        called.setdefault(kind, []).append(name)
    return called


def _branches(rest: str, called: dict[str, list[str]]) -> list[str]:
    found = _BRANCHES.search(rest)
    if found:
        return [s.strip().lstrip("%") for s in found.group(1).split(",")]
    return called.get("true_computation", []) + called.get("false_computation", [])


def loop_traffic(text: str) -> dict[int, LoopTraffic]:
    """Every collective of a compiled HLO module attributed to its loop (module docstring).

    Args:
        text: the compiled module's HLO text (``compiled.as_text()``).

    Returns:
        {loop id: :class:`LoopTraffic`}; loop 0 is the entry computation.
    """
    comps, entry = computations(text)
    loops = {0: LoopTraffic(parent=None, depth=0)}

    def walk(comp: str, loop: int, in_branch: bool, stack: tuple) -> None:
        if comp not in comps or comp in stack:
            return
        stack = (*stack, comp)
        for shape, opcode, rest in comps[comp]:
            if opcode in COLLECTIVES:
                loops[loop].add(shape, rest, in_branch)
                continue
            called = _called(rest)
            if opcode == "while":
                inner = len(loops)
                loops[inner] = LoopTraffic(parent=loop, depth=loops[loop].depth + 1)
                for name in called.get("body", []) + called.get("condition", []):
                    walk(name, inner, False, stack)
            elif opcode == "conditional":
                for name in _branches(rest, called):
                    walk(name, loop, True, stack)
            else:
                for name in called.get("calls", []):
                    walk(name, loop, in_branch, stack)

    if entry is not None:
        walk(entry, 0, False, ())
    return loops


def _descendants(loops: dict[int, LoopTraffic], i: int) -> list[int]:
    kids = [j for j, v in loops.items() if v.parent == i]
    return kids + [d for j in kids for d in _descendants(loops, j)]


def _ancestors(loops: dict[int, LoopTraffic], i: int) -> list[int]:
    out, p = [], loops[i].parent
    while p:  # the entry (0) is counted as "once", not per epoch
        out.append(p)
        p = loops[p].parent
    return out


def comm_summary(text: str) -> CommSummary:
    """Per iteration, per fallback, per epoch and once: the bytes per device of a compiled module.

    The iteration is the deepest loop with collectives on its straight path (a solver's iteration
    loop); its branches and inner loops are its fallbacks; the loops around it its epochs.

    Args:
        text: the compiled module's HLO text (``compiled.as_text()``).

    Returns:
        :class:`CommSummary`.
    """
    loops = loop_traffic(text)
    with_collectives = [i for i, v in loops.items() if i and v.direct_ops]
    total = lambda ids: sum(loops[i].total_bytes for i in ids)
    if not with_collectives:
        return CommSummary(0, 0, 0, 0, 0, total([0]), 0, len(loops) - 1)
    it = max(with_collectives, key=lambda i: loops[i].depth)
    loop = loops[it]
    return CommSummary(
        per_iter=loop.direct_bytes,
        per_iter_ops=loop.direct_ops,
        per_iter_multi=loop.direct_multi,
        per_iter_fallback=loop.branch_bytes + total(_descendants(loops, it)),
        per_epoch=total(_ancestors(loops, it)),
        once=total([0]),
        depth=loop.depth,
        loops=len(loops) - 1,
        groups=tuple(loop.groups),
    )
