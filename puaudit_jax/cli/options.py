"""Command-line options generated from config dataclasses: one source of truth for defaults.

A config dataclass documents each field in the Google-style ``Attributes`` section of its
docstring (the one sphinx's napoleon renders): one ``name: text`` (or ``name (type): text``) entry
per field, indented under the section's title, continuation lines indented deeper; see
:class:`~puaudit_jax.audit.AuditConfig`.

:func:`add_options` turns the fields into ``--kebab-case`` options whose default is the field's
default and whose help is that text, and :func:`options_from_args` reads them back, so changing a
default in the dataclass changes the CLI with it and the two cannot drift. Each option's action
keeps its origin, ``action.config_field == (cls, field name)``, so a test can compare every
option's default with its field's. Types come from the
field annotations: ``int``, ``float``, ``str`` and their ``| None`` forms, and ``tuple[str, ...]``
or ``tuple[float, ...]`` (a comma-separated list on the command line: ``--evidence style,swapped``,
``--scale 1,5``); a field whose choices
are fixed names them in its metadata (``field(metadata={"choices": (...)})``), checked item by item
for a list.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import typing

_SCALARS = {"int": int, "float": float, "str": str, "bool": bool}


_SECTION = re.compile(r"^ *Attributes: *$", re.M)
_ENTRY = re.compile(r"^( *)(\w+)(?: \([^)]*\))?: (.*)$")  # "name: text" or Google's "name (type): text"


def field_docs(cls) -> dict[str, str]:
    """``{field name: help text}`` from the ``Attributes:`` section of ``cls``'s docstring."""
    parts = _SECTION.split(inspect.cleandoc(cls.__doc__ or ""), maxsplit=1)
    if len(parts) < 2:
        return {}
    out, name, indent = {}, None, None
    for line in parts[1].splitlines():
        match = _ENTRY.match(line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, name = len(match.group(1)), match.group(2)
            out[name] = match.group(3).strip()
        elif name and line.strip() and len(line) - len(line.lstrip()) > indent:
            out[name] += " " + line.strip()
        elif line.strip():
            break
    return out


def _comma_list(choices=None, item=str):
    """An argparse ``type``: "a,b" -> ("a", "b") (blanks dropped; "" -> ()), each item an ``item`` in ``choices``."""

    def parse(text: str) -> tuple:
        try:
            items = tuple(item(v.strip()) for v in str(text).split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of numbers") from None
        bad = [v for v in items if choices is not None and v not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; use a comma list of {', '.join(choices)}")
        return items

    return parse


def _scalar_type(name: str, hint, cls) -> tuple[type, bool]:
    """(python type, optional) of field ``name`` annotated ``int | float | str | bool`` (``| None`` allowed).

    ``tuple[str, ...]`` and ``tuple[float, ...]`` give (tuple, False): a comma-separated list.
    """
    if typing.get_origin(hint) is tuple and typing.get_args(hint) in ((str, Ellipsis), (float, Ellipsis)):
        return tuple, False
    args = typing.get_args(hint) or (hint,)
    optional = type(None) in args
    kinds = [a for a in args if a is not type(None)]
    if len(kinds) != 1 or kinds[0] not in _SCALARS.values():
        raise TypeError(f"{cls.__name__}.{name}: only int/float/str/bool (| None) and tuple[str | float, ...] "
                        "fields become options")  # fmt: skip
    return kinds[0], optional


def _selected(cls, include, exclude) -> tuple[dict, list[str]]:
    """({name: Field} of dataclass ``cls``, the names chosen by ``include`` (in order) or ``exclude``)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return fields, (list(include) if include is not None else [n for n in fields if n not in exclude])


def option_name(name: str, rename: dict | None = None) -> str:
    """The command-line spelling of field ``name``: ``--min-group-size`` for ``min_group_size``."""
    return "--" + (rename or {}).get(name, name).replace("_", "-")


def add_options(parser: argparse.ArgumentParser, cls, *, include=None, exclude=(), rename=None, overrides=None) -> None:
    """Add one option per field of dataclass ``cls``.

    Booleans become ``store_true`` flags; ``str | None`` fields with ``choices`` metadata accept ``none``
    for None; the help of each is the field's entry in the class docstring's ``Attributes:`` section.

    Args:
        parser: the argparse parser (or argument group) the options are added to.
        cls: the frozen config dataclass.
        include: these fields only, in this order (None: all fields).
        exclude: fields left out.
        rename: field -> option stem (``{"threshold": "flip_threshold"}``).
        overrides: field -> ``help`` and / or ``metavar`` to use instead (a default stays the field's).

    Raises:
        ValueError: a field without an entry in the ``Attributes:`` section, or an override of
            something other than help and metavar.
    """
    (fields, names), docs, hints = _selected(cls, include, exclude), field_docs(cls), typing.get_type_hints(cls)
    bad = {key for extra in (overrides or {}).values() for key in extra} - {"help", "metavar"}
    if bad:
        raise ValueError(f"add_options overrides only help and metavar, not {sorted(bad)}")
    for name in names:
        f = fields[name]
        kind, optional = _scalar_type(name, hints[name], cls)
        if name not in docs:
            raise ValueError(f"{cls.__name__}.{name} has no help text in its docstring's Attributes: section")
        kwargs = {"default": f.default, "help": docs[name], "dest": (rename or {}).get(name, name)}
        if kind is bool:
            kwargs["action"] = "store_true"
        elif kind is tuple:
            kwargs["type"] = _comma_list(f.metadata.get("choices"), typing.get_args(hints[name])[0])
            kwargs["default"] = ",".join(map(str, f.default)) if f.default else ()  # "" renders as an empty literal
            kwargs["metavar"] = "A,B,..."
        else:
            kwargs["type"] = kind
            choices = f.metadata.get("choices")
            if choices:
                kwargs["choices"] = list(choices) + (["none"] if optional else [])
                kwargs["type"] = str
                if f.default is None:
                    kwargs["default"] = "none"
        kwargs.update((overrides or {}).get(name, {}))
        parser.add_argument(option_name(name, rename), **kwargs).config_field = (cls, name)


def options_from_args(args: argparse.Namespace, cls, *, include=None, exclude=(), rename=None) -> dict:
    """``{field: value}`` of the options :func:`add_options` added (``"none"`` choices -> None).

    Args:
        args: the parsed namespace.
        cls: the config dataclass, as given to :func:`add_options`.
        include: as given to :func:`add_options`.
        exclude: as given to :func:`add_options`.
        rename: as given to :func:`add_options`.
    """
    fields, names = _selected(cls, include, exclude)
    out = {}
    for name in names:
        value = getattr(args, (rename or {}).get(name, name))
        if fields[name].metadata.get("choices") and value == "none":
            value = None
        out[name] = value
    return out
