"""Deprecated keywords mapped onto the frozen config that replaced them, with a DeprecationWarning.

A function whose loose keywords became fields of config objects (ott-jax's ``linear.solve`` takes its
settings as objects) keeps the old keywords for one release: :func:`replace_deprecated` sets each
given one on the config that has the field and warns, naming the objects to pass instead. Used by
the solver (:mod:`puaudit_jax.ot`) and the evaluation protocol (:func:`puaudit_jax.evaluate.evaluate`).
"""

from __future__ import annotations

import dataclasses
import warnings


class _Unset:
    """The default of a deprecated keyword: "not given" (the config's default applies)."""

    def __repr__(self) -> str:
        return "UNSET"


#: The sentinel default of deprecated keywords (:func:`replace_deprecated` drops them).
UNSET = _Unset()


def spelled(config) -> str:
    """``config`` as the call that builds it: its class with the fields that differ from their defaults."""
    fields = (f for f in dataclasses.fields(config) if f.init)
    changed = (f"{f.name}={getattr(config, f.name)!r}" for f in fields if getattr(config, f.name) != f.default)
    return f"{type(config).__name__}({', '.join(changed)})"


def replace_deprecated(entry: str, configs: dict, legacy: dict, renamed: dict | None = None, stacklevel=3) -> dict:
    """``configs`` with the deprecated keywords ``legacy`` set on them, and a DeprecationWarning.

    Args:
        entry: the caller's name, for the messages (e.g. "solve_partial").
        configs: argument name -> frozen config (e.g. {"solver": PartialSinkhorn(), "options": ...}).
        legacy: old keyword -> value; values that are :data:`UNSET` were not given.
        renamed: old keyword -> field name where they differ (ott-jax's ``threshold`` -> ``tol``).
        stacklevel: of the warning: the frames up to the user's call (``warnings.warn``).

    Returns:
        ``configs`` with each given keyword's field replaced on the config that has it (validated
        there); the warning names the arguments to pass instead, e.g. ``solver=PartialSinkhorn(epsilon=0.05)``.

    Raises:
        TypeError: a keyword that is a field of none of the configs.
    """
    given = {key: value for key, value in legacy.items() if value is not UNSET}
    out = dict(configs)
    for key, value in given.items():
        name = (renamed or {}).get(key, key)
        owner = next((arg for arg, cfg in out.items() if name in {f.name for f in dataclasses.fields(cfg)}), None)
        if owner is None:
            raise TypeError(f"{entry}() got an unexpected keyword argument {key!r}")
        out[owner] = dataclasses.replace(out[owner], **{name: value})
    if given:
        new = ", ".join(f"{arg}={spelled(cfg)}" for arg, cfg in out.items() if cfg is not configs[arg])
        warnings.warn(f"{entry}({', '.join(f'{k}=...' for k in given)}) is deprecated and will be removed in the "
                      f"next release: pass {new}", DeprecationWarning, stacklevel=stacklevel)  # fmt: skip
    return out
