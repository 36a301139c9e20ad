"""Tests of the PUAudit pipeline (puaudit_jax.audit, puaudit_jax.audit.denoise): hand-computed small
cases for each step, the bad inputs a user meets, and the cone model of PUAudit §4.1."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from puaudit_jax.audit import audit as _audit
from puaudit_jax.audit.denoise import denoise, kept_size
from puaudit_jax.audit.embed import PairEmbeddings
from puaudit_jax.audit.scorers import ScoreResult
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.datasets import Comparison, comparisons_to_frame
from tests.helpers import unit


def make_table(rows):
    """rows: (id, judge, human, question_type[, response_b]) -> validated table."""
    items = []
    for r in rows:
        rid, judge, human, qt = r[:4]
        rb = r[4] if len(r) > 4 else f"answer b of {rid}"
        items.append(Comparison(rid, f"question {rid}", f"answer a of {rid}", rb, judge, human, qt))
    return comparisons_to_frame(items)


def random_embeddings(table, d=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = table["id"].to_numpy()
    return PairEmbeddings(ids, rng.normal(size=(len(ids), d)), rng.normal(size=(len(ids), d)))


def audit(table, features, **kw):
    """The paper's pipeline (its flip rule) with the cheap centroid scorer unless a test asks otherwise."""
    kw.setdefault("scorer", "centroid")
    kw.setdefault("rule", "paper")
    return _audit(table, features, **kw)


class Recorder:
    """A scorer that records what it was given and returns fixed or cosine-to-first-P scores."""

    name = "recorder"

    def __init__(self, scores=None):
        self.calls, self.scores = [], scores

    def __call__(self, zp, zu, m):
        self.calls.append((np.array(zp), np.array(zu), m))
        s = np.asarray(self.scores[len(self.calls) - 1], float) if self.scores is not None else np.ones(len(zu))
        return ScoreResult(s, "recorder", {})


# ------------------------------------------------------------------------------------------------
# denoising (Appendix A.4): floor sizes, at least one kept, the right items


@pytest.mark.parametrize(
    "n, core, kept", [(1, 1, 1), (2, 1, 1), (3, 2, 1), (10, 7, 4), (20, 14, 9), (100, 70, 49), (7, 4, 2)]
)
def test_denoise_sizes_are_floors(n, core, kept):
    assert kept_size(n, 0.7) == core and kept_size(core, 0.7) == kept
    rng = np.random.default_rng(n)
    e, z = rng.normal(size=(n, 5)), rng.normal(size=(n, 5))
    res = denoise(e, unit(z))
    assert (res.n, res.n_core, res.n_kept) == (n, core, kept)
    assert core == max(1, math.floor(0.7 * n)) and kept == max(1, math.floor(0.7 * core))
    assert len(res.keep) == kept and len(set(res.keep)) == kept


def test_denoise_hand_computed_case():
    # winners' embeddings: 0-5 point along x, 6 and 7 are outliers -> stage 1 (floor(0.7*8)=5) keeps
    # five of the x-ish points; z: among those, 4 point along y and 1 along -y -> stage 2 keeps
    # floor(0.7*5)=3 of the y-aligned ones (largest cosine to the mean direction).
    e = np.array([[1, 0.0], [1, 0.01], [1, -0.01], [1, 0.02], [1, 0.03], [1, 0.5], [0, 1], [-1, 0]])
    z = np.array([[0, 1.0], [0.1, 1], [-0.3, 1], [0, -1], [0.05, 1], [0, 1], [1, 0], [1, 0]])
    z = unit(z)
    res = denoise(e, z)
    # stage 1: cos to the mean of e; items 6 and 7 and the 0.5 one are the three lowest
    assert res.n_core == 5
    # stage 2 mean of z over {0,1,2,3,4} points to +y; the -y item 3 and the tilted item 2 go
    assert list(res.keep) == [0, 1, 4]


def test_denoise_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha1"):
        denoise(np.ones((3, 2)), np.ones((3, 2)), alpha1=0)
    with pytest.raises(ValueError, match="alpha2"):
        denoise(np.ones((3, 2)), np.ones((3, 2)), alpha2=1.5)


def test_pipeline_keeps_floor_per_type():
    rows = [(f"p{t}{i}", "A", "A", t) for t, n in (("x", 10), ("y", 20)) for i in range(n)]
    rows += [(f"u{i}", "A", "missing", "x" if i % 2 else "y") for i in range(6)]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), m=0.5)
    sizes = {d.question_type: (d.n_P, d.n_core, d.n_kept) for d in res.report.denoising}
    assert sizes == {"x": (10, 7, 4), "y": (20, 14, 9)}
    roles = res.items.groupby(["question_type", "role"]).size().to_dict()
    assert roles[("x", "P")] == 4 and roles[("x", "P-filtered")] == 6
    assert roles[("y", "P")] == 9 and roles[("y", "P-filtered")] == 11


# ------------------------------------------------------------------------------------------------
# orientation (§3.1): P by the human, U by the judge


def test_orientation_p_by_human_u_by_judge():
    # every row: e_a = +v, e_b = -v for its own v, so A-wins means z = v / |v|
    table = make_table(
        [("p1", "B", "A", "t"), ("p2", "A", "B", "t"), ("u1", "A", "missing", "t"), ("u2", "B", "missing", "t")]
    )
    v = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
    emb = PairEmbeddings(table["id"], v, -v)
    rec = Recorder()
    res = audit(table, emb, m=0.5, alpha1=1.0, alpha2=1.0, scorer=rec, min_group_size=1)
    zp, zu, m = rec.calls[0]
    # P: p1 human A -> +v1; p2 human B -> -v2 (the judges' verdicts are ignored for P)
    np.testing.assert_allclose(zp, [[1, 0, 0], [0, -1, 0]])
    # U: u1 judge A -> +v3; u2 judge B -> -v4 / sqrt(2)
    np.testing.assert_allclose(zu, [[0, 0, 1], [-1 / np.sqrt(2), -1 / np.sqrt(2), 0]])
    np.testing.assert_allclose(res.u_z, zu, atol=1e-6)
    assert m == 0.5


# ------------------------------------------------------------------------------------------------
# flips exactly where s / max s < eta


@pytest.mark.parametrize("eta", [0.0, 0.25, 0.5, 0.8, 1.0])
def test_flips_exactly_where_normalised_score_below_eta(eta):
    raw = np.array([4.0, 2.0, 1.0, 0.0, 3.2, 2.0, 1.99, 4.0])  # normalised: 1, .5, .25, 0, .8, .5, .4975, 1
    rows = [(f"p{i}", "A", "B", "t") for i in range(5)]
    rows += [(f"u{i}", "A" if i % 3 else "B", "missing", "t") for i in range(len(raw))]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), m=0.7, eta=eta, scorer=Recorder([raw]))
    pool = res.pool
    expected = raw / raw.max() < eta
    np.testing.assert_array_equal(pool["flipped"].to_numpy(), expected)
    np.testing.assert_allclose(pool["score"].to_numpy(), raw / raw.max())
    np.testing.assert_allclose(pool["score_raw"].to_numpy(), raw)
    flipped_judge = pool["judge"].map({"A": "B", "B": "A"})
    np.testing.assert_array_equal(pool["adjusted"], np.where(expected, flipped_judge, pool["judge"]))
    assert res.report.counts.flipped == expected.sum()


def test_single_item_group_is_never_flipped_by_the_seed_rule():
    rows = [(f"p{i}", "A", "A", "big") for i in range(6)] + [
        ("u0", "A", "missing", "big"),
        ("u1", "B", "missing", "big"),
        ("lone", "A", "missing", "tiny"),
    ]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), m=0.5, scorer=Recorder([[1.0, 0.1], [0.3]]))
    assert not res.items.set_index("id").loc["lone", "flipped"]
    assert res.items.set_index("id").loc["lone", "score"] == 1.0


# ------------------------------------------------------------------------------------------------
# m: estimated on a held-out part of the labelled rows (not used as P), clipped; or given


def test_m_estimated_on_holdout_and_clipped():
    rows = [(f"p{i}", "A" if i % 4 else "B", "A", "t") for i in range(40)]  # judge agrees on 3/4
    rows += [(f"u{i}", "A", "missing", "t") for i in range(10)]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), holdout=0.25, seed=3)
    items = res.items.set_index("id")
    held = items[items.role == "holdout"]
    assert len(held) == 10  # floor(0.25 * 40)
    assert res.report.m.raw == pytest.approx((held.judge == held.human).mean())
    assert res.report.m.n_holdout == 10
    assert not set(held.index) & set(items[items.role.isin(["P", "P-filtered"])].index)
    # all agree -> raw 1.0, clipped to 0.99
    rows = [(f"p{i}", "A", "A", "t") for i in range(20)] + [("u", "A", "missing", "t")]
    table = make_table(rows)
    res = audit(table, random_embeddings(table))
    assert res.report.m.raw == 1.0 and res.report.m.value == 0.99 and res.report.m.clipped


def test_given_m_uses_every_labelled_row_as_p():
    rows = [(f"p{i}", "A", "A", "t") for i in range(10)] + [("u", "A", "missing", "t")]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), m=0.8)
    assert res.report.m.to_dict() == {
        "value": 0.8,
        "source": "given",
        "raw": None,
        "n_holdout": 0,
        "clip": None,
        "clipped": False,
    }
    assert res.report.counts.P == 10


# ------------------------------------------------------------------------------------------------
# bad input: a clear error or a documented fallback


def base_rows():
    return [(f"p{i}", "A", "A" if i % 2 else "B", "t") for i in range(8)] + [
        (f"u{i}", "A" if i % 2 else "B", "missing", "t") for i in range(6)
    ]


def test_every_input_id_in_output_in_order_with_status():
    rows = base_rows() + [
        ("tie", "tie", "A", "t"),
        ("same", "A", "missing", "t", "answer a of same"),
        ("htie", "A", "tie", "t"),
    ]
    table = make_table(rows)
    emb = random_embeddings(table[~table.id.isin(["tie", "same", "htie"])])
    res = audit(table, emb, m=0.5)
    assert res.items["id"].tolist() == table["id"].tolist()
    it = res.items.set_index("id")
    assert it.loc["tie", "reason"] == "judge tie" and it.loc["same", "reason"] == "identical responses"
    assert it.loc["htie", "reason"] == "human tie"
    assert (it.loc[["tie", "same", "htie"], "role"] == "excluded").all()
    assert res.report.counts.exclusion_reasons == {"judge tie": 1, "identical responses": 1, "human tie": 1}
    assert set(it["role"]) <= {"P", "P-filtered", "holdout", "U", "excluded"}


def test_empty_p_and_empty_u_are_errors():
    table = make_table([(f"u{i}", "A", "missing", "t") for i in range(5)])
    with pytest.raises(ValueError, match="P would be empty"):
        audit(table, random_embeddings(table), m=0.5)
    table = make_table([(f"p{i}", "A", "A", "t") for i in range(5)])
    with pytest.raises(ValueError, match="U is empty"):
        audit(table, random_embeddings(table), m=0.5)


def test_all_ties_is_a_clear_error():
    table = make_table([(f"x{i}", "tie", "A" if i % 2 else "missing", "t") for i in range(6)])
    with pytest.raises(ValueError, match=r"no usable human-labelled comparison.*6 excluded \(judge tie: 6\)"):
        audit(table, random_embeddings(table), m=0.5)


def test_an_empty_p_or_u_counts_the_exclusions_by_reason():
    """Issue 40: an audit of a failed judge run said "80 rows, 80 excluded, 0 unlabelled", not why."""
    judges, humans = ["missing"] * 4 + ["tie", "A"], ["missing", "B", "missing", "B", "B", "missing"]
    table = make_table([(f"x{i}", j, h, "t") for i, (j, h) in enumerate(zip(judges, humans))])
    why = r"P would be empty\): 6 rows, 5 excluded \(no judge verdict: 4, judge tie: 1\), 1 unlabelled"
    with pytest.raises(ValueError, match=why):
        audit(table, random_embeddings(table), m=0.5)


def test_question_type_with_one_positive_falls_back_to_pooled_reference():
    rows = base_rows() + [
        ("lonely-p", "A", "B", "rare"),
        ("rare-u1", "A", "missing", "rare"),
        ("rare-u2", "B", "missing", "rare"),
    ]
    table = make_table(rows)
    res = audit(table, random_embeddings(table), m=0.5)
    groups = {g.group: g for g in res.report.groups}
    assert groups["rare"].reference == "pooled" and groups["t"].reference == "own type"
    pooled = [d for d in res.report.denoising if d.question_type == "(pooled small types)"]
    assert pooled and pooled[0].types == ("rare",) and pooled[0].n_P == 1
    assert groups["rare"].n_reference == res.report.counts.P_denoised


def test_identical_embeddings_are_excluded_with_a_reason():
    table = make_table(base_rows())
    emb = random_embeddings(table)
    a = emb.a.copy()
    b = emb.b.copy()
    b[-1] = a[-1]  # u5: zero difference vector
    res = audit(table, PairEmbeddings(emb.ids, a, b), m=0.5)
    it = res.items.set_index("id")
    assert it.loc["u5", "status"] == "excluded" and it.loc["u5", "reason"] == "zero difference embedding"
    assert res.report.counts.U == 5


def test_nan_embeddings_are_an_error_naming_the_id():
    table = make_table(base_rows())
    emb = random_embeddings(table)
    a = emb.a.copy()
    a[2, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf embeddings, e.g. \['p2'\]"):
        audit(table, PairEmbeddings(emb.ids, a, emb.b), m=0.5)


def test_mismatched_ids_are_errors():
    table = make_table(base_rows())
    emb = random_embeddings(table)
    short = PairEmbeddings(emb.ids[:-1], emb.a[:-1], emb.b[:-1])
    with pytest.raises(ValueError, match=r"1 usable comparisons have no embeddings, e.g. \['u5'\]"):
        audit(table, short, m=0.5)
    extra = PairEmbeddings(np.r_[emb.ids, ["ghost"]], np.r_[emb.a, emb.a[:1]], np.r_[emb.b, emb.b[:1]])
    with pytest.raises(ValueError, match="ids that are not in the comparisons.*ghost"):
        audit(table, extra, m=0.5)


@pytest.mark.parametrize("m", [0.0, -0.1, 1.01, float("nan"), float("inf")])
def test_m_outside_unit_interval_is_an_error(m):
    table = make_table(base_rows())
    with pytest.raises(ValueError, match=r"m must be in \(0, 1\]"):
        audit(table, random_embeddings(table), m=m)


@pytest.mark.parametrize("eta", [-0.01, 1.5, float("nan")])
def test_eta_outside_unit_interval_is_an_error(eta):
    table = make_table(base_rows())
    with pytest.raises(ValueError, match=r"eta must be in \[0, 1\]"):
        audit(table, random_embeddings(table), m=0.5, eta=eta)


def test_m_equal_one_is_allowed():
    table = make_table(base_rows())
    res = audit(table, random_embeddings(table), m=1.0)
    assert res.report.m.value == 1.0


def test_unknown_scorer_and_rule():
    table = make_table(base_rows())
    with pytest.raises(ValueError, match="unknown scorer"):
        audit(table, random_embeddings(table), m=0.5, scorer="magic")
    with pytest.raises(ValueError, match="unknown rule"):
        audit(table, random_embeddings(table), m=0.5, rule="magic")


def test_encoder_callable_is_accepted():
    table = make_table(base_rows())
    calls = []

    def encoder(texts):
        calls.append(list(texts))
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in texts])

    res = audit(table, encoder, m=0.5, scorer="centroid")
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0])) == 2 * len(table)
    assert calls[0][0].startswith("<|user|>question p0<|assistant|>answer a of p0")
    assert res.report.embeddings["source"] == "encoder"


# ------------------------------------------------------------------------------------------------
# cone model (PUAudit §4.1): the audit raises agreement; POT beats the centroid; exact ~ entropic


def cons(res, data):
    pool = res.pool
    truth = data.truth[pool.index]
    return (pool.judge.to_numpy() == truth).mean(), (pool.adjusted.to_numpy() == truth).mean()


@pytest.fixture(scope="module")
def cone_runs():
    out = []
    for seed in (0, 1):
        data = cone_comparisons(300, 300, d=64, neg_range=(0.2, 0.6), seed=seed)
        runs = {
            s: _audit(data.table, data.embeddings, scorer=s, rule="paper")  # the paper's flip rule
            for s in ("pot", "pot-exact", "centroid")
        }
        out.append((data, runs))
    return out


def test_cone_model_audit_raises_agreement(cone_runs):
    for data, runs in cone_runs:
        orig, adj = cons(runs["pot"], data)
        assert adj - orig > 0.2, (orig, adj)


def test_cone_model_pot_beats_centroid(cone_runs):
    pot = np.mean([cons(r["pot"], d)[1] for d, r in cone_runs])
    centroid = np.mean([cons(r["centroid"], d)[1] for d, r in cone_runs])
    assert pot > centroid + 0.02, (pot, centroid)


def test_cone_model_exact_and_entropic_flip_the_same_items(cone_runs):
    for _, runs in cone_runs:
        a = runs["pot"].pool["flipped"].to_numpy()
        b = runs["pot-exact"].pool["flipped"].to_numpy()
        assert (a != b).sum() <= 5, (a != b).sum()
        assert runs["pot-exact"].report.solver_paths == {"pot:exact-emd": 2}
