"""Numerical checks of the papers' theorems (theory/): what holds, on fixed seeds.

Each test would fail if the code or the claim it checks were wrong. Small sizes; the whole file
runs in well under 90 s on one core.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import lemma_a1, sphere, theorem_4_3, theorem_4_5, theorem_a3, uda_theorem_2


# --------------------------------------------------------------------------- sphere generators
def test_cone_model_validation():
    with pytest.raises(ValueError, match="tau\\^2 > tau - delta"):
        sphere.ConeModel(d=8, tau=0.6, delta=0.1)  # 0.36 < 0.5
    sphere.ConeModel(d=8, tau=0.6, delta=0.1, require_gap=False)
    for bad in (
        dict(d=2),
        dict(d=8, tau=1.0),
        dict(d=8, delta=0.0),
        dict(d=8, alpha=1.0),
        dict(d=8, tau=0.2, delta=1.5),
        dict(d=8, proj="x"),
    ):
        with pytest.raises(ValueError):
            sphere.ConeModel(**bad)


def test_cone_sample_respects_assumptions():
    rng = np.random.default_rng(0)
    model = sphere.ConeModel(d=32, tau=0.6, delta=0.4, alpha=0.3)
    s = sphere.sample_pu(rng, model, 50, 200)
    assert np.allclose(np.linalg.norm(s.P, axis=1), 1) and np.allclose(np.linalg.norm(s.U, axis=1), 1)
    assert np.all(s.P @ s.z_bar >= model.tau - 1e-12)
    assert np.all(s.U[s.u_pos] @ s.z_bar >= model.tau - 1e-12)
    assert np.all(s.U[~s.u_pos] @ s.z_bar < model.tau - model.delta)
    assert s.u_pos.sum() == 60
    # orthogonal parts: unit, orthogonal to z_bar, mean close to 0 (uniform)
    t, e, perp = sphere.decompose(s.U, s.z_bar)
    assert np.allclose(e, np.sqrt(1 - t**2)) and np.allclose(perp @ s.z_bar, 0, atol=1e-12)
    b = sphere.bias_direction(rng, s.z_bar)
    assert abs(b @ s.z_bar) < 1e-12
    assert np.allclose(np.linalg.norm(sphere.perturb(s.z_bar, b, 0.7)), 1)


# --------------------------------------------------------------------------- Lemma A.1
def test_lemma_a1_exact_tail_matches_monte_carlo_and_bounds_hold():
    rng = np.random.default_rng(1)
    d, n_u = 64, 200
    m = lemma_a1.max_correlation_samples(rng, d, n_u, 300)
    t = np.linspace(0.2, 0.6, 9)
    emp = (m[None] > t[:, None]).mean(1)
    exact = lemma_a1.max_tail_exact(t, d, n_u)
    assert np.max(np.abs(emp - exact)) < 0.09
    # the statement (without the proof's factor 2) holds exactly in the non-vacuous range ...
    tt = np.linspace(0, 1, 401)
    for dd in (4, 16, 64, 256, 1024):
        b = lemma_a1.bound_statement(tt, dd, n_u)
        assert np.all(lemma_a1.max_tail_exact(tt, dd, n_u) <= b + 1e-15)
    assert lemma_a1.worst_ratio_single(400)["max_ratio"] <= 1.0
    # ... and is loose: at the exact 5 % quantile the bound is > 4x too large
    q = lemma_a1.quantile_exact(0.05, 256, 1000)
    assert lemma_a1.bound_statement(q, 256, 1000) > 4 * 0.05


# --------------------------------------------------------------------------- Theorem 4.3
CFG43 = replace(theorem_4_3.QUICK, reps=6)


def test_theorem_4_3_exact_pot_recovers_positives_when_m_le_alpha():
    rng = np.random.default_rng(2)
    model = sphere.ConeModel(d=256, tau=0.6, delta=0.4, alpha=0.5)
    for ratio in (1.0, 0.5):
        for _ in range(3):
            r = theorem_4_3.trial(rng, model, 60, 200, ratio)
            assert r["support_in_positives"] and r["mass_precision"] == pytest.approx(1.0)
            if ratio == 1.0:
                assert r["support_recall"] == 1.0
            else:  # "score non-zero iff positive" fails for m < alpha: about half get no mass
                assert 0.5 - 1e-9 <= r["support_recall"] < 0.75


def test_theorem_4_3_m_above_alpha_leaks_exactly_the_excess():
    rng = np.random.default_rng(3)
    model = sphere.ConeModel(d=256, tau=0.6, delta=0.4, alpha=0.5)
    r = theorem_4_3.trial(rng, model, 60, 200, 1.5)
    assert not r["support_in_positives"]
    assert r["mass_precision"] == pytest.approx(1 / 1.5, abs=1e-6)
    assert r["support_recall"] == 1.0


def test_theorem_4_3_bound_is_vacuous_where_recovery_already_holds():
    gb = 0.6**2 - 0.6 + 0.4
    assert theorem_4_3.paper_bound(1024, 400, gb) < 0  # vacuous ...
    assert theorem_4_3.bound_dimension(400, gb) > 8000
    rng = np.random.default_rng(4)
    model = sphere.ConeModel(d=1024, tau=0.6, delta=0.4, alpha=0.5, proj="boundary")
    for _ in range(3):  # ... while the gap is positive
        s = sphere.sample_pu(rng, model, 100, 400)
        assert np.all(theorem_4_3.anchor_gaps(s) > 0)
        assert theorem_4_3.solve(s, 0.5).col_mass[~s.u_pos].sum() <= theorem_4_3.LEAK_TOL


def test_theorem_4_3_gap_assumption_not_needed_and_negative_step_wrong():
    rng = np.random.default_rng(5)
    # tau^2 = 0.36 < tau - delta = 0.5: outside Assumption 4.2, recovery still holds in high d
    model = sphere.ConeModel(d=4096, tau=0.6, delta=0.1, alpha=0.5, proj="boundary", require_gap=False)
    s = sphere.sample_pu(rng, model, 40, 120)
    assert model.gap_base < 0
    assert theorem_4_3.solve(s, 0.5).col_mass[~s.u_pos].sum() <= theorem_4_3.LEAK_TOL
    # tau - delta < 0: the (U_- remains) inequality of the proof is violated by ~ (tau-delta)(tau-1)
    model = sphere.ConeModel(d=4096, tau=0.8, delta=0.9, alpha=0.5, proj="boundary")
    exc = theorem_4_3.negative_bound_excess(sphere.sample_pu(rng, model, 20, 60), 0.8, 0.9)
    assert exc == pytest.approx(0.02, abs=0.005)


def test_theorem_4_3_entropic_leak_grows_with_epsilon():
    rng = np.random.default_rng(6)
    model = sphere.ConeModel(d=64, tau=0.6, delta=0.4, alpha=0.5)
    s = sphere.sample_pu(rng, model, 40, 120)
    leaks = []
    for eps in (0.01, 0.1, 0.3):
        res = theorem_4_3.solve(s, 0.5, method="sinkhorn", epsilon=eps)
        assert res.converged
        leaks.append(res.col_mass[~s.u_pos].sum() / 0.5)
    assert leaks[0] < 1e-3 < leaks[1] < leaks[2] < 0.5


def test_theorem_4_3_quick_cli_writes_results(tmp_path, monkeypatch):
    # the smallest end-to-end run: one tiny sweep through run() + plot + atomic writes
    cfg = replace(
        theorem_4_3.QUICK,
        reps=2,
        dims=(8, 64),
        n_ps=(5, 20),
        n_us=(50, 100),
        m_ratios=(0.5, 1.5),
        epsilons=(0.1,),
        gap_grid=((0.9, 1.2),),
        gap_reps=2,
        n_p=20,
        n_u=60,
    )
    monkeypatch.setattr(theorem_4_3, "QUICK", cfg)
    res = theorem_4_3.main(["--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "theorem_4_3_quick.json").read_text())
    assert data["seeds"]["numpy_master"] == 0 and (tmp_path / "theorem_4_3_quick.png").stat().st_size > 0
    assert res["vs_m"][1]["mass_precision"] < 1.0
    assert not list(tmp_path.glob(".*"))  # no temporary file left by the atomic writes


# --------------------------------------------------------------------------- Theorem 4.5
def test_theorem_4_5_expansion_uses_sqrt_one_minus_tau_squared():
    cfg = replace(theorem_4_5.QUICK, d=64)
    pw = theorem_4_5.pointwise(np.random.default_rng(7), cfg)
    assert pw["max_abs_err_c1_sqrt_1_minus_tau2"] < 1e-4  # first order: eps_i = sqrt(1 - tau_i^2)
    assert pw["max_abs_err_c1_sqrt_1_minus_tau"] > 0.1  # the A.2 formula is wrong
    assert pw["max_abs_err_c2"] < 1e-4  # second order: -tau_i / 2
    adv = [r for r in pw["rows"] if r["b"] == "adversarial"]
    assert all(r["c1_fit"] > r["c1_eps_sqrt_1_minus_tau"] + 0.03 for r in adv)  # bound violated


def test_theorem_4_5_denoising_shrinks_eps_p_and_anchor_sensitivity():
    cfg = replace(theorem_4_5.QUICK, d=128, n_p=100, n_u=120, reps=2, n_lam=3)
    tr = theorem_4_5.transport(np.random.default_rng(8), cfg)["summary"]
    P, Pd = tr["P"], tr["P_denoised"]
    assert Pd["eps_p_max"] < P["eps_p_max"] - 0.2 and Pd["noise_kept"] == 0
    assert Pd["anchor_c1_mean_abs"] < P["anchor_c1_mean_abs"]
    assert Pd["anchor_c1_max_abs"] < P["anchor_c1_max_abs"]
    # the transport-cost slope is far below the m * eps_p the theorem allows
    for s in (P, Pd):
        assert s["abs_slope_total"] < 0.1 * s["m_times_eps_p"]
        assert s["anchor_part_worst_b"] < 0.25 * s["m_times_eps_p"]


# --------------------------------------------------------------------------- Theorem A.3
def test_theorem_a3_mean_direction_rate():
    cfg = replace(theorem_a3.QUICK, ns=(8, 64, 512), reps=40, caps=(0.2,))
    out = theorem_a3.direction_error(np.random.default_rng(9), cfg)
    c = out["caps"][0]
    assert c["slope_error"] == pytest.approx(-0.5, abs=0.06)
    assert c["slope_one_minus_cos"] == pytest.approx(-1.0, abs=0.12)
    assert c["measured_constant"] == pytest.approx(c["predicted_constant"], rel=0.1)
    assert out["denoised"]["slope_error"] == pytest.approx(-0.5, abs=0.08)


def test_theorem_a3_plateau_in_p_ratio():
    cfg = replace(theorem_a3.QUICK, n_h=400, split_seeds=2, p_ratios=(0.05, 0.2, 0.6))
    rows = theorem_a3.p_ratio_plateau(np.random.default_rng(10), cfg)["rows"]
    adj = [r["cons_adj"] for r in rows]
    assert min(adj) > max(r["cons_orig"] for r in rows)  # the audit helps ...
    assert max(adj) - min(adj) < 0.04  # ... and flat across p_ratio
    assert rows[0]["direction_error"] > 2 * rows[-1]["direction_error"]  # while z_hat still moves


# --------------------------------------------------------------------------- UDA Theorem 2
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=20), st.floats(0, 1))
def test_uda_theorem_2_never_increases_total_bias(eps, alpha):
    eps = np.array(eps)
    s_base = uda_theorem_2.total_bias(eps)
    s_uda = uda_theorem_2.total_bias(uda_theorem_2.shrink(eps, alpha))
    assert s_uda <= s_base * (1 + 1e-12) + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=20), st.floats(0, 1), st.booleans())
def test_uda_theorem_2_equality_for_common_sign_biases(eps, alpha, negative):
    eps = -np.array(eps) if negative else np.array(eps)
    s_base = uda_theorem_2.total_bias(eps)
    assert uda_theorem_2.total_bias(uda_theorem_2.shrink(eps, alpha)) == pytest.approx(s_base, rel=1e-9, abs=1e-9)


def test_uda_theorem_2_strict_for_mixed_signs_and_fails_for_per_judge_alpha():
    eps = np.array([-1.0, 2.0, 0.5])
    assert uda_theorem_2.total_bias(uda_theorem_2.shrink(eps, 0.5)) < uda_theorem_2.total_bias(eps)
    ce = uda_theorem_2.per_judge_counterexample()
    assert ce["S_uda"] > ce["S_base"]
    ms = uda_theorem_2.monotone_search(np.random.default_rng(11), replace(uda_theorem_2.QUICK, n_search=20000))
    assert ms["ratio"] > 1.05


def test_uda_theorem_2_real_adapter_is_not_the_idealised_shrinkage():
    real = uda_theorem_2.real_matrices()
    assert len(real["rows"]) == 10
    assert real["n_models_increased"] >= 1  # the learned adapter increases S for some models
    assert any(abs(r["mean_bias_uda"] - r["mean_bias_base"]) > 50 for r in real["rows"])
