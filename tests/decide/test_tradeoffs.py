"""The four lessons' numbers: invariants of workers x efficiency, spot, the controller, variance."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide import tradeoffs
from srifty_kit.decide.planner import Constraints, Job, evaluate, search
from srifty_kit.errors import InputError, hours
from srifty_kit.model.intervals import two_sided_z

JOB = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096.0, checkpoint_gb=10.0)


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    return load_catalog()


# -- (a) ---------------------------------------------------------------------------------------


def test_scaling_grows_the_global_batch_and_loses_statistical_efficiency(model, catalog):
    s = tradeoffs.scaling(model, catalog, JOB, "g4dn.12xlarge", 32, max_nodes=8)
    t = s.table
    assert t["num_workers"].tolist() == [1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32]
    assert (t["global_bsz"] == t["num_workers"] * 32).all()
    eff = t["efficiency"].to_numpy()  # against the reference batch (256): 1 there
    assert (eff > 0).all() and (np.diff(eff) < 0).all()
    assert eff[t["global_bsz"] == 256] == pytest.approx(1.0)
    assert np.allclose(t["steps"] * t["global_bsz"] * eff, JOB.samples, rtol=1e-9)
    assert s.fastest["time_h"] == t["time_h"].min()
    assert s.fastest_upper["time_hi_h"] == t["time_hi_h"].min()
    assert f"Fastest by the point estimate: {s.fastest['num_workers']} workers" in s.text()
    assert "Fastest by the upper end" in s.text() and "measured on 1-2 nodes" in s.text()
    # the synthetic fit measured 1-2 nodes: from 3 nodes on it extrapolates, and says so
    assert "From 12 workers (3+ nodes) the model extrapolates past the 2 nodes" in s.text()


def test_scaling_on_a_type_without_a_price_says_why_it_shows_no_cost(model, catalog):
    """The lesson's dropdown offers measured types the catalog prices nowhere (an Azure or
    on-premises machine): its answer says there is no price, not a silent missing '$'."""
    unpriced = catalog.copy()
    unpriced.loc[unpriced["instance_type"] == "g4dn.12xlarge", "ondemand_usd_per_hr"] = np.nan
    s = tradeoffs.scaling(model, unpriced, JOB, "g4dn.12xlarge", 32, max_nodes=4)
    assert "$" not in s.text()
    first = s.text().splitlines()[0]
    assert first.endswith(
        "; the catalog has no on-demand price for g4dn.12xlarge, so no cost is shown."
    )
    priced = tradeoffs.scaling(model, catalog, JOB, "g4dn.12xlarge", 32, max_nodes=4).text()
    assert "no on-demand price" not in priced and "$" in priced


def test_scaling_puts_the_measured_steps_beside_the_model(model, catalog):
    from tests.builders import synthetic_measurements

    rows = synthetic_measurements()
    s = tradeoffs.scaling(model, catalog, JOB, "g4dn.12xlarge", 32, max_nodes=4, measurements=rows)
    seen = s.measured
    # packed placements of the measured table: 1, 2, 4 workers on one node, 8 on two
    assert seen["num_workers"].tolist() == [1, 2, 4, 8]
    want = rows[(rows["local_bsz"] == 32) & (rows["instance_type"] == "g4dn.12xlarge")]
    want = want[want["num_nodes"] == -(-want["num_workers"] // 4)]
    means = want.groupby("num_workers")["step_time_s"].mean()
    assert np.allclose(seen["measured_step_s"], means.loc[[1, 2, 4, 8]])
    ratio = seen["measured_time_h"] / seen["time_h"]
    assert np.allclose(ratio, seen["measured_step_s"] / seen["step_time_s"])
    assert "Measured beside the model at 4 worker counts" in s.text()


def test_a_type_never_measured_says_where_it_is_carried_from(model, catalog):
    b = tradeoffs.basis(model, "resnet", "p4d.24xlarge")
    assert not b.measured and b.source in {"g4dn.12xlarge", "g6.12xlarge"}
    assert b.phrase().startswith("p4d.24xlarge never measured: carried from")
    assert tradeoffs.basis(model, "resnet", "g6.12xlarge").measured
    assert tradeoffs.measured_types(model, "resnet") == ["g4dn.12xlarge", "g6.12xlarge"]
    assert "never measured" in tradeoffs.basis(model, "resnet", "p4d.24xlarge").why_wide(1)
    assert tradeoffs.basis(model, "resnet", "g6.12xlarge").why_wide(3) == (
        "3 nodes is beyond the 2 measured"
    )


def test_a_type_whose_row_gives_no_vcpus_is_scaled_without_a_garbage_count(model, catalog):
    # the lessons' on-premises rows give GPUs and figures but no vCPUs (no EC2 quota counts
    # them): the count was cast from NaN to int64, which warned in a plain session and made
    # -9.2e18 vCPUs per node
    row = catalog[catalog["instance_type"] == "g6.12xlarge"].iloc[:1]
    onprem = pd.concat([catalog, row.assign(instance_type="onprem-4xl4", vcpus=np.nan)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        curve = tradeoffs.scaling(model, onprem, JOB, "onprem-4xl4", 32, max_nodes=4)
        types = tradeoffs._types(onprem, ("onprem-4xl4", "g6.12xlarge"))
    assert list(types.vcpus) == [0, 48]
    assert curve.table["num_nodes"].max() == 4 and np.isfinite(curve.table["time_h"]).all()


def test_measured_curves_of_the_reference_campaigns(reference_measurements):
    table = pd.read_csv(reference_measurements)
    seen = tradeoffs.measured_steps(table, "cifar10", "g4dn.12xlarge", 64, 4)
    # the campaign measured 1-4 nodes: 1..16 workers packed, at batch 64 exactly
    assert seen["num_workers"].max() == 16 and (seen["measured_bsz"] == 64).all()
    near = tradeoffs.measured_steps(table, "cifar10", "g4dn.12xlarge", 256, 4)
    assert (near["measured_bsz"] == 257).all()  # the campaign's batch nearest 256
    assert tradeoffs.measured_steps(table, "cifar10", "g4dn.12xlarge", 300, 4).empty


def test_a_larger_noise_scale_never_makes_fewer_workers_fastest(model, catalog):
    runs = [
        tradeoffs.scaling(model, catalog, replace(JOB, noise_scale=b), "g4dn.12xlarge", 32)
        for b in (100.0, 1000.0, 10_000.0, 1e6)
    ]
    point = [s.fastest["num_workers"] for s in runs]
    upper = [s.fastest_upper["num_workers"] for s in runs]
    assert point == sorted(point) and upper == sorted(upper) and upper[0] < upper[-1]


# -- (b) ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spot_case(model, catalog):
    long_job = replace(JOB, samples=2e9, checkpoint_interval_h=1.0)
    return tradeoffs.spot_tradeoff(
        model, catalog, long_job, "g4dn.12xlarge", 8, 32, bucket=">20%", runs=4000
    )


def test_spot_runs_only_ever_take_longer_and_cost_less_on_average(spot_case):
    od = spot_case.ondemand
    assert (spot_case.runs["time_h"] >= od["time_h"] - 1e-9).all()
    assert spot_case.expected["cost_usd"] < od["cost_usd"]
    # the closed form is the simulation's mean, to first order in the reclaim rate
    simulated = spot_case.runs["time_h"].mean()
    assert spot_case.expected["time_h"] == pytest.approx(simulated, rel=0.01)
    assert 0 <= spot_case.miss_share <= 1 and spot_case.deadline_h == pytest.approx(
        od["time_h"] * 1.03
    )


def test_a_curve_computed_once_answers_every_checkpoint_interval_alike(model, catalog):
    job = replace(JOB, samples=2e9)
    deadline = tradeoffs.spot_deadline(model, catalog, job, "g4dn.12xlarge", 8, 32)
    args = {"deadline_h": deadline, "runs": 500}
    curve = tradeoffs.spot_curve(model, catalog, job, "g4dn.12xlarge", 8, 32, **args)
    for tau in (0.25, 1.0, 6.0):
        moved = replace(job, checkpoint_interval_h=tau)
        fresh = tradeoffs.spot_tradeoff(model, catalog, moved, "g4dn.12xlarge", 8, 32, **args)
        again = tradeoffs.spot_tradeoff(
            model, catalog, moved, "g4dn.12xlarge", 8, 32, curve=curve, **args
        )
        assert again.text() == fresh.text()
        pd.testing.assert_frame_equal(again.by_interval, fresh.by_interval)
    # a curve of another reclaim rate or restart is refused, not silently reused
    with pytest.raises(InputError, match="other arguments"):
        tradeoffs.spot_tradeoff(
            model, catalog, replace(job, restart_h=1.0), "g4dn.12xlarge", 8, 32, curve=curve,
            **args,
        )  # fmt: skip
    with pytest.raises(InputError, match="other arguments"):
        tradeoffs.spot_tradeoff(
            model, catalog, job, "g4dn.12xlarge", 8, 32, bucket=">20%", curve=curve, **args
        )


def test_checkpointing_rarely_risks_the_deadline_and_often_costs_writes(spot_case):
    grid = spot_case.by_interval
    at_one_hour = grid.loc[(grid["checkpoint_interval_h"] - 1.0).abs().idxmin(), "miss_share"]
    # every minute: the writes alone overrun a deadline 3% past the on-demand time
    assert grid["miss_share"].iloc[0] == 1.0
    # every 8 hours: reclaims lose enough work to miss it, where hourly checkpoints do not
    assert grid["miss_share"].iloc[-1] > at_one_hour
    best = grid["cost_usd"].idxmin()
    assert 0 < best < len(grid) - 1  # an interior optimum: writes on one side, lost work on other
    assert "Cheapest interval" in spot_case.text()


def test_the_cheapest_interval_is_young_dalys_and_inside_the_grid(spot_case):
    grid = spot_case.by_interval
    c, m = spot_case.write_h, 1 / spot_case.cluster_hazard
    assert spot_case.young_daly_h == pytest.approx(np.sqrt(2 * c * m))
    # the closed form's optimum agrees with Young's first-order one while c << M
    assert spot_case.best["interval_h"] == pytest.approx(spot_case.young_daly_h, rel=0.05)
    assert grid["cost_usd"].min() >= spot_case.best["cost_usd"] - 1e-6
    assert grid["checkpoint_interval_h"].max() >= 3 * spot_case.young_daly_h
    assert not spot_case.at_edge and (grid["above_best"] >= -1e-9).all()
    # on-demand writes the same checkpoints: dearer the more often it writes
    assert (np.diff(grid["ondemand_cost_usd"]) < 0).all()
    # below the interval where the writes alone pass the deadline, every run misses
    short = grid[grid["checkpoint_interval_h"] < spot_case.all_miss_below_h]
    assert len(short) and (short["miss_share"] == 1.0).all()
    assert (grid.loc[grid["checkpoint_interval_h"] > spot_case.all_miss_below_h * 1.1,
                     "miss_share"] < 1).all()  # fmt: skip
    assert "Young/Daly" in spot_case.text() and "on-demand: on-demand" not in spot_case.text()


def test_young_dalys_formula_says_a_long_mtbf_as_the_answer_says_it(model, catalog):
    """At the rarest reclaims 8 nodes see one every 3,604 h: the formula says '3,604 h' too,
    not '3.6e+03 h'."""
    r = tradeoffs.spot_tradeoff(model, catalog, JOB, "g4dn.12xlarge", 8, 32, bucket="<5%", runs=50)
    mtbf = 1 / r.cluster_hazard
    assert mtbf > 1000
    text = r.text()
    assert "e+" not in text
    assert f"a reclaim every {mtbf:,.0f} h" in text
    assert f"sqrt(2 x {r.write_h:.3g} h x {mtbf:,.0f} h) = " in text


def test_the_restart_moves_what_the_spot_answer_says_reclaims_cost(model, catalog):
    """The panel's 'restart takes' control: at the listed reclaim rate a longer restart moves
    no rounded hour or dollar, so the answer says what the reclaims add to the run (reclaims x
    (half a checkpoint period + the restart)), the expected run's own difference from
    on-demand, and that moves with the restart."""
    job = replace(JOB, samples=2e9, checkpoint_interval_h=2.0)
    said = {}
    for restart in (0.1, 0.25):
        r = tradeoffs.spot_tradeoff(
            model, catalog, replace(job, restart_h=restart), "g4dn.12xlarge", 8, 32,
            bucket="5-10%", runs=200,
        )  # fmt: skip
        half = (r.checkpoint_interval_h + r.write_h) / 2
        added = r.expected["time_h"] - r.ondemand["time_h"]
        assert added == pytest.approx(r.expected["reclaims"] * (half + restart))
        line = next(x for x in r.text().splitlines() if x.startswith("Each reclaim"))
        assert f"{r.expected['reclaims']:.3g} x ({hours(half)} + {hours(restart)})" in line
        assert f"= {hours(added)} more than on-demand's {hours(r.ondemand['time_h'])}" in line
        assert f"({r.expected['reclaims']:.3g} reclaims)" in r.text()  # the same count above
        said[restart] = line
    assert said[0.1] != said[0.25]


def test_an_interval_near_the_cheapest_is_not_said_to_cost_0_0_percent_more(model, catalog):
    """Lesson b's question stop (6 h against the cheapest 5.38 h) cost '0.0% more', which
    reads as if 6 h were the optimum while the figure marks them apart: within 0.1% of the
    cheapest plan the answer says so; further off it gives the share."""
    job = replace(JOB, samples=2e9)
    args = {"bucket": "10-15%", "runs": 200}
    best = tradeoffs.spot_tradeoff(model, catalog, job, "g4dn.12xlarge", 8, 32, **args).best
    near = replace(job, checkpoint_interval_h=best["interval_h"] * 1.1)
    r = tradeoffs.spot_tradeoff(model, catalog, near, "g4dn.12xlarge", 8, 32, **args)
    above = r.expected["cost_usd"] / r.best["cost_usd"] - 1
    assert 0 < above < 0.0005
    assert "this one costs within 0.1% of it." in r.text() and "0.0% more" not in r.text()
    far = replace(job, checkpoint_interval_h=0.25)
    r = tradeoffs.spot_tradeoff(model, catalog, far, "g4dn.12xlarge", 8, 32, **args)
    above = r.expected["cost_usd"] / r.best["cost_usd"] - 1
    assert f"this one costs {above:.1%} more." in r.text()


def test_young_daly_has_no_optimum_without_reclaims_or_writes():
    from srifty_kit.decide.spot import young_daly_interval

    assert young_daly_interval(0.02, 0.0) == np.inf
    assert young_daly_interval(0.0, 0.01) == np.inf
    assert young_daly_interval(0.02, 0.01) == pytest.approx(2.0)


# -- (c) ---------------------------------------------------------------------------------------


def test_the_controller_balances_a_mix_and_rebalances_after_a_slowdown(model, catalog):
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=32, slow_factor=2.0)
    trace = lesson.trace
    assert (trace.groupby("step")["local_bsz"].sum() == lesson.global_bsz).all()
    s = lesson.summary
    assert 0 <= s["settled_at"] < lesson.slow_at and s["resettled_at"] > lesson.slow_at
    assert s["settled_step_s"] < s["even_step_s"] and s["final_step_s"] < s["slowed_step_s"]
    before = trace[(trace["step"] == lesson.slow_at - 1) & (trace["worker"] == 0)]
    after = trace[(trace["step"] == trace["step"].max()) & (trace["worker"] == 0)]
    assert int(after["local_bsz"].iloc[0]) < int(before["local_bsz"].iloc[0])
    # settled: the faster type (g6) carries the larger batch
    last = trace[trace["step"] == lesson.slow_at - 1].groupby("instance_type")["local_bsz"]
    assert last.mean()["g6.12xlarge"] > last.mean()["g4dn.12xlarge"]
    assert f"re-settles by step {s['resettled_at']}" in lesson.text()
    # the two types are unequal enough that the controller works before any slowdown
    assert s["settled_at"] > 0 and "computes" in lesson.text()


def test_without_a_slowdown_nothing_happens_at_the_slow_step(model, catalog):
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=32, slow_factor=1.0)
    s = lesson.summary
    assert s["slowed_step_s"] == pytest.approx(s["settled_step_s"])
    assert "slower at step" not in lesson.text()


def test_the_controller_puts_the_measured_steps_beside_the_models_lines(model, catalog):
    from tests.builders import synthetic_measurements

    seen = synthetic_measurements()
    seen = seen[seen["instance_type"] == "g4dn.12xlarge"]  # as if g6 had no campaign
    lesson = tradeoffs.controller_lesson(
        model, catalog, JOB, local_bsz=32, slow_factor=2.0, measurements=seen
    )
    m, c = lesson.measured, lesson.curves
    # one worker's measured means at every measured batch in the curve's range, none for g6
    assert set(m["instance_type"]) == {"g4dn.12xlarge"}
    assert m["local_bsz"].tolist() == [8, 16, 32, 64]
    one = seen[seen["num_workers"] == 1].groupby("local_bsz")["step_time_s"].mean()
    assert np.allclose(m["measured_s"], one.loc[[8, 16, 32, 64]])
    assert c["local_bsz"].min() == 4 and c["local_bsz"].max() == 128
    assert (c["step_lo_s"] <= c["step_s"]).all() and (c["step_s"] <= c["step_hi_s"]).all()
    # the synthetic steps are linear with 2% noise: the model's line lies beside them
    line = c[c["instance_type"] == "g4dn.12xlarge"]
    model_at = np.interp(np.log(m["local_bsz"]), np.log(line["local_bsz"]), line["step_s"])
    assert np.allclose(model_at, m["measured_s"], rtol=0.05)
    # the controller's line is the secant of the model's compute time where the batches move
    r = lesson.lines.iloc[0]
    b = np.array([16.0, 32.0, 64.0])
    compute = model.predict_arrays("resnet", "g4dn.12xlarge", np.ones(3), np.ones(3), b,
                                   catalog=catalog)["compute_s"]  # fmt: skip
    line_at = r["alpha_s"] + r["beta_s"] * b
    assert np.allclose(line_at[[0, 2]], compute[[0, 2]]) and line_at[1] == pytest.approx(
        compute[1], rel=0.05
    )  # exact at half and twice the batch, close between
    assert "over the 4 batches measured (8-64)" in lesson.text()
    # the last step leaves every worker's compute within the deadband of the mean
    last = lesson.settled["compute_s"]
    assert (abs(last / last.mean() - 1) <= lesson.deadband + 1e-9).all()


def test_the_controller_says_when_two_types_are_too_alike_to_balance(model, catalog):
    lesson = tradeoffs.controller_lesson(
        model, catalog, JOB, ("g4dn.12xlarge", "g4dn.12xlarge"), local_bsz=32
    )
    assert "inside the controller's +-5% deadband: it has nothing to balance" in lesson.text()


def test_the_controller_says_one_step_later_in_the_singular(model, catalog):
    """At batch 1024 the controller re-settles the step after the slowdown's first."""
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=1024, slow_factor=2.0)
    assert lesson.summary["resettled_at"] == lesson.slow_at + 1
    text = lesson.text()
    assert f"re-settles by step {lesson.slow_at + 1} (1 step later)" in text
    assert "1 steps" not in text


def test_the_controller_says_steps_of_seconds_in_seconds_and_batches_whole(model, catalog):
    """At batch 1024 a step takes seconds: the answer says '4.056 s', never '4056 ms' or
    '4.06e+03 ms', and the settled batches as whole samples (never '1.25e+03')."""
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=1024, slow_factor=2.0)
    text = lesson.text()
    assert lesson.summary["even_step_s"] > 1
    assert "e+" not in text and " ms" not in text
    assert f"{lesson.summary['even_step_s']:.4g} s per step" in text
    settled = lesson.trace[lesson.trace["step"] == lesson.slow_at - 1]
    for name, batch in settled.groupby("instance_type")["local_bsz"].mean().items():
        assert f"{name} {batch:.0f}" in text


@pytest.mark.parametrize("bad", [{"slow_at": 0}, {"slow_at": 40}, {"slow_factor": 0.0}])
def test_controller_lesson_says_what_is_wrong(model, catalog, bad):
    with pytest.raises(InputError):
        tradeoffs.controller_lesson(model, catalog, JOB, **bad)


# -- (d) ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated(model, catalog):
    return evaluate(model, catalog, JOB, Constraints(confidence=0.9, max_nodes=8))


def test_simulated_runs_put_the_one_sided_ends_at_their_quantiles(evaluated):
    """The runs are drawn from the model's belief: the search's one-sided ends (time_lo_h,
    time_hi_h at 90%) are the 10% and 90% quantiles of a candidate's runs, its point their
    median, as the search's promise 'P(time <= time_hi_h) = 90%' says."""
    c = evaluated.candidates
    at = np.flatnonzero(~c["spot"])[[0, -1]]
    runs = 200_000
    t = tradeoffs.run_times(c, at, runs, np.random.default_rng(1))
    assert t.shape == (runs, 2)
    for j, i in enumerate(at):
        for end, share in (("time_lo_h", 0.1), ("time_h", 0.5), ("time_hi_h", 0.9)):
            # the share of runs within each end, to 4 sd of its binomial noise
            noise = np.sqrt(share * (1 - share) / runs)
            assert abs((t[:, j] <= c[end][i]).mean() - share) <= 4 * noise, (end, i)


def test_lesson_d_misses_as_often_as_the_model_allows_and_says_its_central_interval(
    evaluated,
):
    """A deadline at the upper end's pick's own one-sided 90% end: the model allows that pick
    to miss in 10% of runs, and the lesson's simulation reports about that (within 4 sd of
    its binomial noise), not the 5% a 5%-95% reading of the 10%-90% ends gave. Each pick's
    printed interval is the model's central 90% interval of its time (its belief's
    5% and 95% quantiles), and its one-sided end is said as '90% of runs within'."""
    from scipy.special import ndtri

    c = evaluated.candidates
    first = tradeoffs.deadline_judgement(evaluated, 3 * float(c["time_hi_h"][~c["spot"]].min()))
    deadline = float(first.table.set_index("rule").loc["upper", "time_hi_h"])
    runs = 40_000
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=runs)
    rows = j.table.set_index("rule")
    noise = np.sqrt(0.1 * 0.9 / runs)
    assert abs(rows.loc["upper", "miss_share"] - 0.10) <= 4 * noise, rows.loc["upper"]
    text = j.text()
    for rule in ("point", "upper"):
        r = rows.loc[rule]
        # lognormal: the one-sided 90% end gives the sd, the sd the central interval
        sd = np.log(r["time_hi_h"] / r["time_h"]) / ndtri(0.9)
        lo, hi = (
            r["time_h"] * np.exp(-two_sided_z(0.9) * sd),
            r["time_h"] * np.exp(two_sided_z(0.9) * sd),
        )
        assert r["band_lo_h"] == pytest.approx(lo) and r["band_hi_h"] == pytest.approx(hi)
        said = f"(90% interval {hours(lo)}-{hours(hi)}; 90% of runs within {hours(r['time_hi_h'])})"
        assert said in text, text


@pytest.mark.parametrize("stretch", [1.2, 3.0, 10.0])
def test_the_upper_end_pick_is_the_search_pick_and_rarely_misses(
    model, catalog, evaluated, stretch
):
    # deadlines the upper end can meet: a little, a lot and far beyond the fastest on-demand
    # configuration's upper end (the question is which pick, not whether there is one)
    c = evaluated.candidates
    deadline = stretch * float(c["time_hi_h"][~c["spot"]].min())
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=20_000)
    rows = {r["rule"]: r for _, r in j.table.iterrows()}
    want = search(model, catalog, JOB, Constraints(deadline_h=deadline, max_nodes=8), top=1)
    assert rows["upper"]["time_hi_h"] == want.pick["time_hi_h"]
    assert rows["upper"]["cost_hi_usd"] == want.pick["cost_hi_usd"]
    # its upper end meets the deadline: at most 1 - level of runs miss, plus 4 sd of MC noise
    assert rows["upper"]["miss_share"] <= 0.10 + 4 * np.sqrt(0.1 * 0.9 / 20_000)
    # the point estimate's pick is chosen from a superset: never dearer on average
    assert rows["point"]["cost_usd"] <= rows["upper"]["cost_usd"]
    assert all(isinstance(r["never_measured"], str) for _, r in j.table.iterrows())
    edges, shares = j.histogram()
    assert all(s.sum() == pytest.approx(1.0) for s in shares.values())
    assert edges[0] <= min(t.min() for t in j.runs.values())


def test_the_safer_pick_says_its_extra_cost_with_both_costs_and_both_misses(evaluated):
    """Lesson d's question, 'what does the safer pick cost?', answered with the numbers the
    sentence compares: 'costs 89% more than the point estimate's ($27.78 against $14.70)
    and misses ... 4.0% of the runs against 23.9%', not '+89% against ..., for that
    difference in misses'."""
    from srifty_kit.decide.explanation import money

    deadline = tradeoffs.disagreeing_deadline(evaluated, (0.5, 1, 2, 4, 8, 16), runs=500)
    assert deadline is not None
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=500)
    point, upper = (j.table.set_index("rule").loc[r] for r in ("point", "upper"))
    assert not j.same_pick and not j.same_misses
    more = upper["cost_usd"] / point["cost_usd"] - 1
    last = j.text().splitlines()[-1]
    assert last == (
        f"The upper end's pick costs {more:.0%} more than the point estimate's "
        f"({money(upper['cost_usd'])} against {money(point['cost_usd'])}) and misses the "
        f"deadline in {upper['miss_share']:.1%} of the runs against {point['miss_share']:.1%}."
    )


def test_a_deadline_both_rules_pick_alike_says_so_not_a_difference(model, catalog):
    """On one measured type, far past its slowest configuration, both rules pick the cheapest
    one: the answer says they agree, not that the upper end's pick costs '+0% against the
    point estimate's, for that difference in misses'."""
    one = catalog[catalog["instance_type"] == "g4dn.12xlarge"]
    evaluated = evaluate(model, one, JOB, Constraints(confidence=0.9, max_nodes=8))
    c = evaluated.candidates
    deadline = 2 * float(c["time_hi_h"][~c["spot"]].max())
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=500)
    point, upper = (j.table.set_index("rule").loc[r] for r in ("point", "upper"))
    key = ["instance_type", "num_nodes", "local_bsz"]
    assert point[key].tolist() == upper[key].tolist()
    text = j.text()
    assert "for that difference in misses" not in text
    assert "Both rules pick the same configuration" in text
    assert j.same_pick


def test_two_picks_that_miss_alike_are_not_said_to_differ_in_misses(model, catalog):
    """With a type the model never measured (g6e.xlarge, carried from g6.12xlarge) and a
    deadline far past every configuration, the rules pick different configurations that both
    miss 0.0%: the answer says the promise buys no fewer misses, not 'for that difference in
    misses'."""
    two = catalog[catalog["instance_type"].isin(["g6e.xlarge", "g6.12xlarge"])]
    evaluated = evaluate(model, two, JOB, Constraints(confidence=0.9, max_nodes=8))
    c = evaluated.candidates
    deadline = 2 * float(c["time_hi_h"][~c["spot"]].max())
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=500)
    assert not j.same_pick
    assert j.table["miss_share"].tolist() == [0.0, 0.0]
    text = j.text()
    assert "for that difference in misses" not in text
    assert "both miss the deadline in 0.0% of the runs" in text
    assert "the promise buys no fewer misses" in text
    assert j.same_misses


def test_judging_needs_on_demand_candidates_and_a_positive_deadline(model, catalog, evaluated):
    with pytest.raises(InputError, match="on-demand"):
        tradeoffs.deadline_judgement(
            evaluate(model, catalog, JOB, Constraints(spot=True, max_nodes=2)), 5.0
        )
    with pytest.raises(InputError, match="deadline"):
        tradeoffs.deadline_judgement(evaluated, 0.0)


def test_the_variance_lesson_starts_where_both_picks_exist_and_disagree(model, catalog):
    ev = evaluate(model, catalog, JOB, Constraints(confidence=0.9, max_nodes=8))
    stops = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 24.0)
    start = tradeoffs.disagreeing_deadline(ev, stops, runs=300)
    assert start in stops
    table = tradeoffs.deadline_judgement(ev, start, runs=300).table.set_index("rule")
    assert set(table.index) == {"point", "upper"}
    gap = table.loc["point", "miss_share"] - table.loc["upper", "miss_share"]
    for d in stops:  # no other stop with both picks has them further apart
        other = tradeoffs.deadline_judgement(ev, d, runs=300).table
        if {"point", "upper"} <= set(other.get("rule", ())):
            share = other.set_index("rule")["miss_share"]
            assert share["point"] - share["upper"] <= gap
    assert tradeoffs.disagreeing_deadline(ev, (1e-3,), runs=300) is None
