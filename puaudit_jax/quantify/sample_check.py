"""Is the labelled set a random sample of the pool?

The assumption every pool-mean estimate here (human only, PPI++) rests on, checked where the data
allow: the labelled share should not depend on the question type, nor on the cluster (prompt) a row
belongs to, nor (in an audit) on the judge's verdict, which every row has: labels drawn by their
value (say, only the rows a human called B) show there.

A chi-square test of independence of (group x labelled / unlabelled) counts; a p-value below
``alpha`` puts a warning in the leaderboard, the CLI's output and the audit report. A failed check
does not make the stratified estimator (:func:`.estimators.stratified_ppi_mean`) invalid when the
groups are the strata: it only asks for a random sample within each type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc, gammaln


@dataclass(frozen=True)
class SampleCheck:
    """The labelled share by group and the chi-square p-value of "the share is the same in every group".

    Attributes:
        by: "question_type", "judge" (the judge's verdict) or a cluster column.
        shares: group -> (items, labelled share), over all rows.
        p_value: the chi-square test's p-value (None: one group, or no unlabelled or no labelled row).
        alpha: the p-value below which :attr:`warning` is set.
        within: None, or the column whose values the test is made within (``by``'s groups compared inside
            each stratum, so labelled shares that differ between strata do not count).
    """

    by: str
    shares: dict
    p_value: float | None
    alpha: float = 0.01
    within: str | None = None

    @property
    def warning(self) -> str:
        """A sentence when p < alpha, else ""."""
        if self.p_value is None or self.p_value >= self.alpha:
            return ""
        where = "" if self.within is None else f" within {self.within} values"
        return (f"the labelled share differs across {self.by} values{where} (chi-square p = {self.p_value:.2g}): the "
                "labelled items are not a random sample of the pool, which PPI++ and the human-only "
                "estimates of pool means assume (the stratified estimator needs it only within types)")  # fmt: skip

    def to_dict(self) -> dict:
        """JSON-able form, with the warning."""
        return {"by": self.by, "shares": {k: list(v) for k, v in self.shares.items()}, "p_value": self.p_value,
                "alpha": self.alpha, "within": self.within, "warning": self.warning}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> SampleCheck:
        """Inverse of :meth:`to_dict`."""
        shares = {k: (int(v[0]), float(v[1])) for k, v in data["shares"].items()}
        return cls(data["by"], shares, data["p_value"], data.get("alpha", 0.01), data.get("within"))


def sample_check(groups, labelled, unlabelled, by: str, strata=None, within: str | None = None) -> SampleCheck:
    """Is the labelled set a random sample? The share labelled per group, and a test of equal shares.

    With ``strata`` the test is made inside each stratum: the chi-square statistics and degrees of
    freedom are summed over the strata where a test is defined (independent under the null).

    Args:
        groups: (R,) each row's group label (e.g. its question type).
        labelled: (R,) bool, the labelled rows.
        unlabelled: (R,) bool, the unlabelled rows (other rows take no part).
        by: the grouping's name, reported.
        strata: (R,) stratum labels, or None.
        within: the strata's name, reported.

    Returns:
        The :class:`SampleCheck` (p-value None where no test is defined).
    """
    groups = np.asarray(groups).astype(str)
    names, counts = _counts(groups, labelled, unlabelled)
    shares = {g: (int(c.sum()), float(c[0] / c.sum())) for g, c in zip(names, counts)}
    if strata is None:
        return SampleCheck(by, shares, None if _undefined(counts) else independence_p_value(counts))
    strata = np.asarray(strata).astype(str)
    stat, dof = 0.0, 0
    for stratum in sorted(set(strata[labelled | unlabelled])):
        _, inside = _counts(groups, labelled & (strata == stratum), unlabelled & (strata == stratum))
        if not _undefined(inside):
            part, part_dof = chi_square(inside)
            stat, dof = stat + part, dof + part_dof
    return SampleCheck(by, shares, float(chdtrc(dof, stat)) if dof else None, within=within)


def _counts(groups: np.ndarray, labelled, unlabelled) -> tuple[list[str], np.ndarray]:
    """The groups present among the rows, and their (g, 2) labelled / unlabelled counts."""
    names = sorted(set(groups[labelled | unlabelled]))
    counts = [[int((labelled & (groups == g)).sum()), int((unlabelled & (groups == g)).sum())] for g in names]
    return names, np.array(counts, dtype=np.int64).reshape(-1, 2)


def _undefined(counts: np.ndarray) -> bool:
    """No test of a (g, 2) table: one group, or no labelled or no unlabelled row."""
    return len(counts) < 2 or counts[:, 1].sum() == 0 or counts[:, 0].sum() == 0


def chi_square(counts: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic and degrees of freedom of a (g, 2) table with no empty row or column.

    Yates' continuity correction at one degree of freedom, as ``scipy.stats.chi2_contingency``.
    """
    observed = np.asarray(counts, np.float64)
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    dof = (observed.shape[0] - 1) * (observed.shape[1] - 1)
    if dof == 1:  # Yates: each cell moved half a count towards its expectation (no further)
        diff = expected - observed
        observed = observed + np.sign(diff) * np.minimum(0.5, np.abs(diff))
    return float(((observed - expected) ** 2 / expected).sum()), dof


def independence_p_value(counts: np.ndarray) -> float:
    """Pearson's chi-square test of independence of a (g, 2) table with no empty row or column.

    ``scipy.stats.chi2_contingency(counts)[1]`` (:func:`chi_square`), without scipy.stats' 0.6 s import
    (a warm audit's start-up); the tests compare the two.
    """
    stat, dof = chi_square(counts)
    return float(chdtrc(dof, stat))


def audit_sample_checks(types, status, table, cluster_by: str | None) -> tuple[SampleCheck, ...]:
    """The checks of an audit's rows, by question type, by the judge's verdict and by the cluster column.

    By question type and by ``table``'s ``judge`` column (within question types) when either has several
    values among the rows, and by ``cluster_by``'s column when the audit clusters.

    Args:
        types: (n,) each row's question type.
        status: (n,) "labelled" / "unlabelled" (excluded rows take no part).
        table: the audited table, n rows (its ``judge`` column and the cluster column).
        cluster_by: the audit's cluster column, or None.

    Returns:
        The :class:`SampleCheck` of each grouping checked.
    """
    labelled, unlabelled = np.asarray(status) == "labelled", np.asarray(status) == "unlabelled"
    checks = []
    if len(set(np.asarray(types)[labelled | unlabelled])) > 1:
        checks.append(sample_check(types, labelled, unlabelled, "question_type"))
    judge = table["judge"].to_numpy(dtype=object)
    if len(set(judge[labelled | unlabelled])) > 1:  # within types: their shares may differ by design
        checks.append(sample_check(judge, labelled, unlabelled, "judge", strata=types, within="question_type"))
    if cluster_by is not None:
        checks.append(sample_check(table[cluster_by].to_numpy(), labelled, unlabelled, cluster_by))
    return tuple(checks)


def fisher_exact_p(table) -> float:
    """Two-sided p-value of Fisher's exact test of a 2 x 2 table of counts.

    ``scipy.stats.fisher_exact(table).pvalue``: the hypergeometric probability of every table with
    the same margins that is no more likely than this one (relative tolerance 1e-7, as scipy's),
    without scipy.stats' 0.6 s import; the tests compare the two.
    """
    (a, b), (c, d) = np.asarray(table, np.int64)
    rows, col, n = a + b, a + c, a + b + c + d
    if min(rows, c + d, col, b + d) == 0:
        return 1.0
    x = np.arange(max(0, col - (c + d)), min(rows, col) + 1)  # the top-left cell of every such table
    margins = gammaln(rows + 1) + gammaln(n - rows + 1) + gammaln(col + 1) + gammaln(n - col + 1) - gammaln(n + 1)
    log_p = margins - gammaln(x + 1) - gammaln(rows - x + 1) - gammaln(col - x + 1) - gammaln(n - rows - col + x + 1)
    observed = log_p[x == a][0]
    return float(min(1.0, np.exp(log_p[log_p <= observed + np.log1p(1e-7)]).sum()))


PERMUTATIONS = 999  # the balance check's permutations (its smallest p-value is 1 / 1000)


@dataclass(frozen=True)
class BalanceCheck:
    """Do the labelled rows look like the pool on the values a score reads? (:func:`balance_check`).

    Attributes:
        by: what was compared (e.g. "evidence", "audit score").
        features: feature -> (labelled mean, pool mean).
        p_value: the permutation p-value (None: no labelled or no pool row, or no feature).
        alpha: the p-value below which :attr:`warning` is set.
        within: the strata the labels were permuted within ("question_type"), or None.
        permutations: permutations drawn.
    """

    by: str
    features: dict
    p_value: float | None
    alpha: float = 0.01
    within: str | None = None
    permutations: int = PERMUTATIONS

    @property
    def warning(self) -> str:
        """A sentence when p < alpha, else ""."""
        if self.p_value is None or self.p_value >= self.alpha:
            return ""
        gap = max(self.features, key=lambda k: abs(self.features[k][0] - self.features[k][1]))
        lab, pool = self.features[gap]
        where = "" if self.within is None else f" within {self.within} values"
        return (f"the labelled rows differ from the pool on the {self.by}{where} (permutation p = {self.p_value:.2g}; "
                f"largest gap: {gap} {lab:.2f} labelled, {pool:.2f} pool): they are not a random sample of the "
                "pool")  # fmt: skip

    def to_dict(self) -> dict:
        """JSON-able form, with the warning."""
        return {"kind": "balance", "by": self.by, "features": {k: list(v) for k, v in self.features.items()},
                "p_value": self.p_value, "alpha": self.alpha, "within": self.within,
                "permutations": self.permutations, "warning": self.warning}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> BalanceCheck:
        """Inverse of :meth:`to_dict`."""
        features = {k: (float(v[0]), float(v[1])) for k, v in data["features"].items()}
        return cls(data["by"], features, data["p_value"], data.get("alpha", 0.01), data.get("within"),
                   data.get("permutations", PERMUTATIONS))  # fmt: skip


def check_from_dict(data: dict):
    """A :class:`SampleCheck` or :class:`BalanceCheck` from its JSON form (``kind`` tells them apart)."""
    return BalanceCheck.from_dict(data) if data.get("kind") == "balance" else SampleCheck.from_dict(data)


def _centred(x: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """(R, p) ``x`` minus its mean within each stratum."""
    out = np.empty_like(x)
    for s in np.unique(strata):
        inside = strata == s
        out[inside] = x[inside] - x[inside].mean(axis=0)
    return out


def hotelling(z: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """(B,) Hotelling's T^2 of the mean difference between chosen and other rows of centred ``z``.

    Args:
        z: (R, p) features centred within strata (every column sums to 0), of full column rank.
        chosen: (B, R) 0/1, the labelled rows of each of B labellings (the same count in each).
    """
    n_1 = chosen[0].sum()
    d = (chosen @ z) * (1 / n_1 + 1 / (len(z) - n_1))  # mean(labelled) - mean(pool): the columns sum to 0
    inv = np.linalg.pinv(np.cov(z, rowvar=False).reshape(z.shape[1], z.shape[1]))
    return np.einsum("bi,ij,bj->b", d, inv, d)


def balance_check(features, names, labelled, pool, strata=None, *, by: str = "evidence", alpha: float = 0.01,
                  permutations: int = PERMUTATIONS, seed: int = 0) -> BalanceCheck:  # fmt: skip
    """A classifier two-sample test of labelled rows against the pool, within strata, by permutation.

    The statistic is Hotelling's T^2 of the within-stratum centred features: the separation the best linear
    classifier of "labelled or not" reaches. Its null distribution comes from ``permutations`` relabellings
    that keep each stratum's labelled count (labels random within question types, as the guarantee
    assumes); p = (1 + #{T_perm >= T}) / (1 + permutations). Constant features are left out.

    Args:
        features: (R, p) the values each row's score reads.
        names: (p,) their names.
        labelled: (R,) bool, the labelled rows.
        pool: (R,) bool, the pool rows (the others take no part).
        strata: (R,) the strata to permute within (question types), or None.
        by: what the features are, for the warning.
        alpha: the p-value below which the check warns.
        permutations: relabellings drawn.
        seed: their seed.

    Returns:
        The :class:`BalanceCheck`.
    """
    rows = np.asarray(labelled, bool) | np.asarray(pool, bool)
    x, lab = np.asarray(features, np.float64)[rows], np.asarray(labelled, bool)[rows]
    strata = np.zeros(rows.sum(), int) if strata is None else np.asarray(strata).astype(str)[rows]
    mean = lambda rows, k: float(x[rows, k].mean()) if rows.any() else float("nan")  # noqa: E731
    means = {str(n): (mean(lab, k), mean(~lab, k)) for k, n in enumerate(names)}
    z = _centred(x, strata)
    z = z[:, np.ptp(z, axis=0) > 0]
    within = "question_type" if len(np.unique(strata)) > 1 else None
    if not lab.any() or lab.all() or z.shape[1] == 0:
        return BalanceCheck(by, means, None, alpha, within, permutations)
    rng = np.random.default_rng([seed, 2512_0001])
    chosen = np.empty((permutations + 1, len(lab)))
    chosen[0] = lab
    for s in np.unique(strata):
        inside = np.flatnonzero(strata == s)
        chosen[1:, inside] = rng.permuted(np.broadcast_to(lab[inside], (permutations, len(inside))), axis=1)
    t = hotelling(z, chosen)
    p_value = float((1 + (t[1:] >= t[0] - 1e-12).sum()) / (1 + permutations))
    return BalanceCheck(by, means, p_value, alpha, within, permutations)
