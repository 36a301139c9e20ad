"""The ``puaudit`` command line: parsing and dispatch only; each command's computing is in its package."""

from .main import main

__all__ = ["main"]
