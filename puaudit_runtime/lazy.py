"""Packages whose public names are imported on first use (PEP 562), so importing the package costs nothing.

A package's ``__init__.py`` lists where each public name comes from, as its ``from .x import a, b``
lines did, and hands the list to :func:`lazy_package`::

    __all__ = ["AuditConfig", "audit", ...]
    __getattr__, __dir__ = lazy_package(__name__, {".config": ("AuditConfig",), ".pipeline": ("audit",)})

``from package import name`` and ``package.name`` import the submodule then; ``dir(package)`` and
``from package import *`` list every name as before. So ``puaudit --help`` imports no numerical
library: it reads the config dataclasses, whose modules are light, without the package's heavy ones.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping, Sequence


class _LazyPackage(types.ModuleType):
    """A package whose public names win over its submodules of the same name.

    The import system binds a submodule to its package's attribute once it is loaded (``audit.score``
    the module), where an eager ``from .score import score`` had bound the function after it: a
    public name that is also a submodule's name keeps meaning the public object.
    """

    def __setattr__(self, name: str, value) -> None:
        exported = self.__dict__.get("_lazy_origin", {})
        if name in exported and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            return
        super().__setattr__(name, value)


def lazy_package(package: str, exports: Mapping[str, Sequence[str]]) -> tuple[Callable, Callable]:
    """The module ``__getattr__`` and ``__dir__`` of package ``package``.

    Args:
        package: the package's ``__name__``.
        exports: relative module (``".config"``, ``"..datasets.verdicts"``) -> the public names it gives.

    Returns:
        (``__getattr__``, ``__dir__``): the first imports a public name's module on first access and
        keeps the name in the package; the second lists the public names with the loaded ones.
    """
    module = sys.modules[package]
    origin = {name: source for source, names in exports.items() for name in names}
    module.__dict__["_lazy_origin"] = origin
    module.__class__ = _LazyPackage

    def __getattr__(name: str):
        if name not in origin:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(origin[name], package), name)
        module.__dict__[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(module.__dict__) | set(origin))

    return __getattr__, __dir__
