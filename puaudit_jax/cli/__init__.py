"""The ``puaudit`` command line: parsing and dispatch only; each command's computing is in its package."""

from .main import CommandError, build_parser, main

__all__ = ["CommandError", "build_parser", "main"]
