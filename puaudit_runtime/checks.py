"""Range checks of settings: a ValueError that names the argument and says what it accepts.

One set of checks for the configs and entry points of every package (the OT solver's settings, the
consensus configs, the probes' extraction config, the audit and quantify configs) and for the
command line's argparse types, so that the Python API and ``puaudit`` reject the same values with the
same words. Pure Python: the configs that call these are read by the CLI's parser, which imports no
numerical library (NumPy's numbers pass as the numbers they are, NumPy's bool as a bool).

Every check raises ``ValueError("<name> must <need>[ (<what>)], got <value!r>")``:

    name   the argument as the caller spells it ("tol", "--limit"); "" for none (an argparse type,
           whose error argparse prefixes with the option)
    need   what is accepted, by default from the check's bounds ("be an integer >= 1", "be a finite
           number > 0", "be in (0, 1]", "be one of ('a', 'b')", with " or None" when ``optional``);
           a caller whose message is established passes its own, verbatim ("be positive and finite")
    what   a note on the meaning or unit, in parentheses ("bootstrap resamples")

Bools are no numbers here (``True`` is not the integer 1), NaN and infinities are no real numbers,
and a string is never coerced: ``"0.5"`` is refused like any other non-number.

Table files name a bad row where a user finds it in an editor: :func:`row_label` ("line 4" of a csv
with its header, "line 3" of a jsonl, "row 2" otherwise); :func:`is_missing_text` says which cells
hold no text (None, NaN, blank).
"""

from __future__ import annotations

import math
import numbers
import sys

__all__ = [
    "check_choice",
    "check_flag",
    "check_fraction",
    "check_int",
    "check_range",
    "check_real",
    "is_flag",
    "is_int",
    "is_real",
]


def is_int(value) -> bool:
    """An integer, Python's or NumPy's; not a bool (NumPy's ``bool_`` is no ``numbers.Integral``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """A real number, Python's or NumPy's, that is a finite float; not a bool, NaN or an infinity."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the floats
        return False


def is_flag(value) -> bool:
    """True or False, Python's or NumPy's."""
    numpy = sys.modules.get("numpy")  # not imported: no NumPy bool can exist
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


def _fail(name: str, need: str, value, what: str = "") -> ValueError:
    subject = f"{name} must" if name else "must"
    return ValueError(f"{subject} {need}{f' ({what})' if what else ''}, got {value!r}")


def _or_none(need: str, optional: bool) -> str:
    return need + (" or None" if optional else "")


def check_int(name: str, value, minimum: int | None = None, what: str = "", *, optional: bool = False,
              need: str | None = None) -> int | None:  # fmt: skip
    """``value`` as a Python int: an integer (not a bool) >= ``minimum``; None passes when ``optional``.

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check.
        minimum: the smallest value allowed, or None for no bound.
        what: what the setting is, shown in parentheses in the error ("" for nothing).
        optional: whether None passes (returned as None).
        need: the error's requirement instead of "be an integer >= <minimum>".

    Returns:
        ``int(value)``, or None when ``value`` is None and ``optional``.

    Raises:
        ValueError: ``"<name> must be an integer >= <minimum> (<what>), got <value!r>"``.
    """
    if value is None and optional:
        return None
    if not is_int(value) or (minimum is not None and value < minimum):
        default = "be an integer" + ("" if minimum is None else f" >= {minimum}")
        raise _fail(name, need or _or_none(default, optional), value, what)
    return int(value)


def check_real(name: str, value, minimum: float | None = None, *, strict: bool = False, what: str = "",
               optional: bool = False, need: str | None = None) -> float | None:  # fmt: skip
    """``value`` as a float: a finite real number, >= ``minimum`` (> with ``strict``) when given.

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check.
        minimum: the bound, or None for none.
        strict: whether ``value`` must exceed ``minimum`` (> rather than >=).
        what: what the setting is, shown in parentheses in the error ("" for nothing).
        optional: whether None passes (returned as None).
        need: the error's requirement instead of "be a finite number >= <minimum>".

    Returns:
        ``float(value)``, or None when ``value`` is None and ``optional``.

    Raises:
        ValueError: ``"<name> must be a finite number > <minimum> (<what>), got <value!r>"``.
    """
    if value is None and optional:
        return None
    if not is_real(value) or (minimum is not None and not (value > minimum if strict else value >= minimum)):
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
        raise _fail(name, need or _or_none(f"be a finite number{bound}", optional), value, what)
    return float(value)


def check_range(name: str, value, low: float, high: float, bounds: str = "[]", *, what: str = "",
                optional: bool = False, need: str | None = None) -> float | None:  # fmt: skip
    """``value`` as a float: a finite real number in the interval ``bounds`` from ``low`` to ``high``.

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check.
        low: the interval's lower end.
        high: the interval's upper end.
        bounds: the interval's brackets: "[]" (closed), "()" (open), "(]" or "[)".
        what: what the setting is, shown in parentheses in the error ("" for nothing).
        optional: whether None passes (returned as None).
        need: the error's requirement instead of "be in <interval>".

    Returns:
        ``float(value)``, or None when ``value`` is None and ``optional``.

    Raises:
        ValueError: ``"<name> must be in (<low>, <high>] (<what>), got <value!r>"``; also for ``bounds``
            not one of the four (a bug in the caller).
    """
    if bounds not in ("[]", "()", "(]", "[)"):
        raise ValueError(f"bounds must be one of '[]', '()', '(]', '[)', got {bounds!r}")  # a bug in the caller
    if value is None and optional:
        return None
    above = is_real(value) and (value >= low if bounds[0] == "[" else value > low)
    if not (above and (value <= high if bounds[1] == "]" else value < high)):
        interval = f"{bounds[0]}{low:g}, {high:g}{bounds[1]}"
        raise _fail(name, need or _or_none(f"be in {interval}", optional), value, what)
    return float(value)


def check_fraction(name: str, value, bounds: str = "()", *, what: str = "", optional: bool = False,
                   need: str | None = None) -> float | None:  # fmt: skip
    """:func:`check_range` from 0 to 1, open by default: a level, a share, a probability.

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check.
        bounds: the interval's brackets, as :func:`check_range` ("()": 0 < value < 1).
        what: what the setting is, shown in parentheses in the error ("" for nothing).
        optional: whether None passes (returned as None).
        need: the error's requirement instead of "be in (0, 1)".

    Returns:
        ``float(value)`` in [0, 1], or None when ``value`` is None and ``optional``.

    Raises:
        ValueError: ``value`` is not a finite number inside ``bounds``.
    """
    return check_range(name, value, 0, 1, bounds, what=what, optional=optional, need=need)


def check_choice(name: str, value, choices, *, optional: bool = False, need: str | None = None):
    """``value`` itself when it is one of ``choices`` (or None when ``optional``).

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check (a bool never matches, nor does an unhashable value or an array).
        choices: the allowed values (any iterable).
        optional: whether None passes (returned as None).
        need: the error's requirement instead of "be one of (<choices>)".

    Raises:
        ValueError: ``"<name> must be one of ('a', 'b'), got <value!r>"``.
    """
    if value is None and optional:
        return None
    try:
        ok = not isinstance(value, bool) and value in tuple(choices)
    except (TypeError, ValueError):  # unhashable, or an array compared elementwise
        ok = False
    if not ok:
        raise _fail(name, need or _or_none(f"be one of {tuple(choices)!r}", optional), value)
    return value


def check_flag(name: str, value, *, need: str | None = None) -> bool:
    """``value`` as a Python bool: True or False (NumPy's too), not 0, 1 or "yes".

    Args:
        name: the setting's name, first word of the error ("" for none).
        value: the value to check.
        need: the error's requirement instead of "be True or False".

    Raises:
        ValueError: ``"<name> must be True or False, got <value!r>"``.
    """
    if not is_flag(value):
        raise _fail(name, need or "be True or False", value)
    return bool(value)


def row_label(path, row: int) -> str:
    """Where the 0-based data ``row`` of a table file is: its line (.csv after the header, .jsonl) or its row."""
    suffix = str(path).lower().rsplit(".", 1)[-1]
    return {"csv": f"line {row + 2}", "jsonl": f"line {row + 1}"}.get(suffix, f"row {row + 1}")


def is_missing_text(value) -> bool:
    """True for a cell that holds no text: None, NaN or a blank string (a number or other value is text enough)."""
    return value is None or value != value or (isinstance(value, str) and not value.strip())
