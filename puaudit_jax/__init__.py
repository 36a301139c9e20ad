"""puaudit-jax: auditing LLM judges with partial optimal transport."""

from ._version import __version__

__all__ = ["__version__"]
