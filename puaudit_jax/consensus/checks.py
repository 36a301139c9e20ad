"""Checks of the consensus options: :mod:`puaudit_runtime.checks`, the range checks of every package.

Used by the configs (:class:`~.bradley_terry.BTConfig`, :class:`~.elo.EloConfig`,
:class:`~.alignment.AlignConfig`) and the entry points (:func:`~.matrices.score_matrices`,
:func:`~.bradley_terry.bootstrap_bt`), so ``puaudit consensus`` and the Python API reject the same
values with the same message (the CLI prints it as ``error: ...``). Kept as a name: new code imports
:mod:`puaudit_runtime.checks`.
"""

from __future__ import annotations

from puaudit_runtime.checks import check_fraction, check_int, check_real

__all__ = ["check_fraction", "check_int", "check_real"]
