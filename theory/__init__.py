"""Numerical checks of the papers' theorems (PUAudit §4 / Appendix A, UDA appendix Theorem 2).

One module per statement, each runnable as ``python -m theory.<name> [--quick] [--out DIR]``:

- :mod:`theory.sphere`       generators on S^{d-1}: the cone model, mixtures, bias directions.
- :mod:`theory.theorem_4_3`  support recovery of exact / entropic partial OT; utility-gap bound.
- :mod:`theory.lemma_a1`     tail of the maximal correlation with N uniform vectors.
- :mod:`theory.theorem_4_5`  first / second-order change of cosine and transport cost under a bias.
- :mod:`theory.theorem_a3`   n^{-1/2} error of the mean direction; the p_ratio plateau (Table 6).
- :mod:`theory.uda_theorem_2` aggregate absolute bias never increases under consensus shrinkage.

See ``theory/README.md`` for what each statement says, what is measured and where the paper is
loose or wrong. Nothing in the project imports this package.
"""
