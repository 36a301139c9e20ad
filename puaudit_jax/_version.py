"""The package's version, the one place it is written (setup.cfg, ``puaudit --version`` and the docs read it)."""

__version__ = "0.1.0"
