"""Deciding among a given list, and the next measurement to make (value of information)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.planner import Constraints, Job, search
from srifty_kit.decide.probes import LAUNCH_H, probe_sentence, suggest_probes
from tests.builders import measurements

TYPE = "g4dn.12xlarge"


@pytest.fixture(scope="module")
def small_model() -> StepTimeModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StepTimeModel().fit(measurements(2))


def _listed(nodes=(1, 2, 4, 8, 12, 16)) -> pd.DataFrame:
    k = np.array(nodes)
    return pd.DataFrame(
        {"instance_type": TYPE, "num_nodes": k, "num_workers": 4 * k, "local_bsz": 32}
    )


JOB = Job("resnet", samples=2e8)


def test_search_decides_among_exactly_the_candidates_listed(small_model):
    listed = _listed()
    result = search(
        small_model, load_catalog(), JOB, Constraints(deadline_h=100), candidates=listed
    )
    assert result.n_candidates == len(listed)
    keys = set(zip(listed["num_nodes"], listed["num_workers"], strict=True))
    assert set(zip(result.ranked["num_nodes"], result.ranked["num_workers"], strict=True)) <= keys
    pick = result.pick
    assert pick["p_meet"] >= 0.9
    # the probability is the belief's: its quantile at the confidence is within the deadline
    assert pick["time_hi_h"] <= 100 * (1 + 1e-9)
    # and it is the least expected cost among those sure enough
    sure = result.ranked[result.ranked["p_meet"] >= 0.9]
    assert pick["cost_mean_usd"] == sure["cost_mean_usd"].min()


def test_a_listed_pricing_is_kept_and_bad_lists_are_refused(small_model):
    listed = _listed((2, 4)).assign(pricing=["spot", "on-demand"])
    result = search(small_model, load_catalog(), JOB, Constraints(), candidates=listed, top=5)
    assert sorted(result.ranked["pricing"]) == ["on-demand", "spot"]
    assert result.ranked.loc[result.ranked["pricing"] == "spot", "num_nodes"].tolist() == [2]
    with pytest.raises(InputError, match="did you mean"):
        search(small_model, None, JOB, candidates=_listed().assign(instance_type="g4dn.12xlarg"))
    with pytest.raises(InputError, match="pricing"):
        search(small_model, None, JOB, candidates=_listed().assign(pricing="reserved"))
    with pytest.raises(InputError, match="num_workers"):
        search(small_model, None, JOB, candidates=_listed().drop(columns="num_workers"))
    with pytest.raises(InputError, match="no rows"):
        search(small_model, None, JOB, candidates=_listed().iloc[:0])


def test_a_listed_configuration_the_constraints_rule_out_is_left_out_and_said(small_model):
    # before: a list was ranked whatever max_nodes, the vCPU quota or the type filters said,
    # so `--candidates FILE --max-nodes 4` could pick 16 nodes
    listed = pd.concat(
        [
            _listed(),
            pd.DataFrame(
                [{"instance_type": "p3.8xlarge", "num_nodes": 2, "num_workers": 8, "local_bsz": 32}]
            ),
        ],
        ignore_index=True,
    )
    catalog = load_catalog()
    vcpus = int(catalog.loc[catalog["instance_type"] == TYPE, "vcpus"].iloc[0])
    for constraints, kept in (
        (Constraints(max_nodes=4), {(TYPE, 1), (TYPE, 2), (TYPE, 4), ("p3.8xlarge", 2)}),
        (Constraints(vcpu_quota=2 * vcpus), {(TYPE, 1), (TYPE, 2), ("p3.8xlarge", 2)}),
        (Constraints(families=("g4dn",), max_nodes=8), {(TYPE, k) for k in (1, 2, 4, 8)}),
        (Constraints(instance_types=("p3.8xlarge",)), {("p3.8xlarge", 2)}),
    ):
        result = search(small_model, catalog, JOB, constraints, candidates=listed, top=20)
        assert result.n_candidates == len(kept), constraints
        ranked = set(zip(result.ranked["instance_type"], result.ranked["num_nodes"], strict=True))
        assert ranked == kept, constraints
        for t, k in zip(listed["instance_type"], listed["num_nodes"], strict=True):
            if (t, k) not in kept:  # each row left out is said, by its type or its cluster
                assert t in result.skipped or f"{k} x {t}" in result.skipped, (t, k)
    said = search(small_model, catalog, JOB, Constraints(max_nodes=4), candidates=listed).skipped
    assert said[f"16 x {TYPE}"] == "over the node limit of 4"
    # nothing left: the answer says the filters bind, it does not fail
    none = search(small_model, catalog, JOB, Constraints(max_nodes=1), candidates=_listed((2, 4)))
    assert not none.feasible and none.why.binding == "filters"
    assert "(2 over the node limit of 1)" in none.explanation
    assert none.explanation.endswith("the vCPU quota or the node limit.")


def test_a_listed_table_s_own_columns_are_passed_through_to_its_rows(small_model):
    # design.md: extra columns are kept and passed through (before: dropped from the result)
    listed = _listed((1, 2, 4)).assign(
        quote=["Q-1", "Q-2", "Q-4"], reserved_until=[None, "2027-01", "2027-02"]
    )
    listed["cost_usd"] = 1.0  # a result's own column keeps the result's figure
    result = search(small_model, load_catalog(), JOB, Constraints(), candidates=listed, top=5)
    ranked = result.ranked
    assert len(ranked) == 3
    for row in ranked.itertuples():
        assert row.quote == f"Q-{row.num_nodes}"
    assert ranked.loc[ranked["num_nodes"] == 1, "reserved_until"].isna().all()
    assert result.pick["quote"] == f"Q-{result.pick['num_nodes']}"
    assert (ranked["cost_usd"] != 1.0).all() and list(ranked.columns).count("cost_usd") == 1
    assert "model" not in ranked  # the training model the check added is no column of theirs
    assert "quote" in result.pareto


def test_a_misspelt_filter_beside_a_list_is_refused_as_without_one(small_model):
    # before: every listed row was "not among the instance types asked for", exit 1
    for constraints in (
        Constraints(instance_types=("g4dn.12xlarg",)),
        Constraints(families=("g4d",)),
    ):
        with pytest.raises(InputError, match="did you mean 'g4dn"):
            search(small_model, load_catalog(), JOB, constraints, candidates=_listed())


def test_a_listed_spot_row_without_a_spot_price_is_said_not_dropped_silently(small_model):
    # the embedded catalog has no spot price for p5.4xlarge; before: its spot row vanished
    # and, alone, left "no instance type passes the filters" without a reason
    catalog = load_catalog()
    assert catalog.loc[catalog["instance_type"] == "p5.4xlarge", "spot_usd_per_hr"].isna().all()
    p5 = pd.DataFrame(
        {"instance_type": "p5.4xlarge", "num_nodes": 2, "num_workers": 2, "local_bsz": 32},
        index=[0, 1],
    ).assign(pricing=["spot", "on-demand"])
    listed = pd.concat([_listed((1,)).assign(pricing="on-demand"), p5], ignore_index=True)
    result = search(small_model, catalog, JOB, Constraints(), candidates=listed, top=5)
    assert result.n_candidates == 2
    assert "no spot price" in result.skipped["p5.4xlarge"]
    alone = search(small_model, catalog, JOB, Constraints(), candidates=p5.iloc[:1])
    assert not alone.feasible and "no spot price" in alone.explanation


def test_an_empty_pricing_cell_is_priced_as_a_list_without_the_column(small_model):
    # the contract lets pricing be empty (before: refused, "pricing must be on-demand or
    # spot, got nan"); empty is on-demand, and spot too where spot is allowed
    listed = _listed((1, 2)).assign(pricing=[None, "spot"])
    for spot, want in (
        (False, [(1, "on-demand"), (2, "spot")]),
        (True, [(1, "on-demand"), (1, "spot"), (2, "spot")]),
    ):
        result = search(
            small_model, load_catalog(), JOB, Constraints(spot=spot), candidates=listed, top=5
        )
        got = sorted(zip(result.ranked["num_nodes"], result.ranked["pricing"], strict=True))
        assert got == want, spot
    blank = pd.DataFrame(
        {"instance_type": TYPE, "num_nodes": [1], "num_workers": 4, "local_bsz": 32, "pricing": " "}
    )
    result = search(small_model, load_catalog(), JOB, Constraints(), candidates=blank)
    assert result.ranked["pricing"].tolist() == ["on-demand"]
    # beside the same row on-demand, the empty one adds only what that row does not ask for
    both = pd.concat([blank, blank.assign(pricing="on-demand")], ignore_index=True)
    result = search(small_model, load_catalog(), JOB, Constraints(spot=True), candidates=both)
    assert sorted(result.ranked["pricing"]) == ["on-demand", "spot"]
    assert result.n_candidates == 2


def test_a_list_from_python_is_checked_and_ranked_as_the_command_line_ranks_a_file(small_model):
    # the same contract and the same one-row-per-configuration as `srifty search --candidates`
    with pytest.raises(InputError) as refused:
        search(small_model, None, JOB, candidates=_listed().drop(columns="local_bsz"))
    said = str(refused.value)
    assert "'local_bsz'" in said and "model" not in said  # a list names no training model
    # a list has no placement column: the fix must not send the user to one
    with pytest.raises(InputError, match="gpus_per_node 4") as refused:
        search(small_model, None, JOB, candidates=_listed().assign(gpus_per_node=8))
    assert "by num_workers" in str(refused.value) and "placement" not in str(refused.value)
    twice = pd.concat([_listed((2, 4)), _listed((4,)).assign(local_bsz=32.0)], ignore_index=True)
    # rows named as every other check names a DataFrame's: by its index (a file's by lines)
    with pytest.warns(UserWarning, match=r"dropped 1 row repeating .*\(index 2\)"):
        result = search(small_model, load_catalog(), JOB, Constraints(), candidates=twice, top=5)
    assert result.n_candidates == 2 and len(result.ranked) == 2
    # every bad row is counted, not only the first twenty kept
    bad = _listed(tuple(range(1, 26))).assign(pricing="reserved")
    with pytest.raises(InputError, match=r"index 0, 1, 2, 3, 4 \(\+20 more\)"):
        search(small_model, None, JOB, candidates=bad)


def test_a_bad_row_of_a_filtered_list_is_named_by_its_own_index_label(small_model):
    # before: "rows 1" (the position from 0) for the row labelled 11 (12 nodes) of the list;
    # and a repeat "(rows 2)" for the row labelled 20
    listed = _listed(tuple(range(1, 21)))
    kept = listed[listed["num_nodes"] % 4 == 0].copy()  # labels 3, 7, 11, 15, 19
    kept.loc[11, "pricing"] = "reserved"
    with pytest.raises(InputError) as refused:
        search(small_model, load_catalog(), JOB, Constraints(), candidates=kept)
    assert "column 'pricing', index 11:" in str(refused.value)
    again = pd.concat([kept.drop(columns="pricing"), listed.loc[[19]].rename(index={19: 20})])
    with pytest.warns(UserWarning, match=r"repeating a configuration listed before \(index 20\)"):
        search(small_model, load_catalog(), JOB, Constraints(), candidates=again)


def _decide(small_model, constraints: Constraints, listed: pd.DataFrame):
    """The search among ``listed`` on the embedded catalog."""
    return search(small_model, load_catalog(), JOB, constraints, candidates=listed)


def _tight(small_model) -> tuple:
    """A deadline the 8-node cluster meets at its median but not at 90%: a question the
    model cannot answer without measuring."""
    listed = _listed()
    loose = search(small_model, load_catalog(), JOB, Constraints(), candidates=listed, top=10)
    eight = loose.ranked[loose.ranked["num_nodes"] == 8].iloc[0]
    deadline = float(eight["time_h"] * 1.05)
    tight = search(
        small_model, load_catalog(), JOB, Constraints(deadline_h=deadline), candidates=listed
    )
    return tight, deadline


def test_an_unanswerable_question_gets_a_probe_worth_more_than_it_costs(small_model):
    tight, _ = _tight(small_model)
    probes = suggest_probes(tight, k=2)
    assert not probes.empty
    first = probes.iloc[0]
    assert first["num_nodes"] > 2  # a node count never measured: where the doubt is
    assert first["expected_saving_usd"] > first["cost_usd"] > 0
    assert first["steps"] == 200
    assert list(probes.columns[:4]) == ["instance_type", "num_nodes", "num_workers", "local_bsz"]
    assert (probes["net_usd"].diff().dropna() <= 0).all()  # best first
    said = probe_sentence(probes)
    assert said.startswith(f"Measure {int(first['num_nodes'])} x {TYPE}") and "saving" in said
    # the same seed, the same suggestion
    assert suggest_probes(tight, k=2).equals(probes)


def test_a_job_that_already_runs_one_way_is_never_promised_more_than_it_costs(small_model):
    # a week's job ran on a configuration that did finish: left unanswered, it runs that way
    # again at what it paid, once, so no probe can be expected to save more than that; the
    # default prices an unanswered question at twice a run with no assurance
    _, deadline = _tight(small_model)
    tight = _decide(small_model, Constraints(deadline_h=0.7 * deadline), _listed())
    assert tight.pick is None
    free = suggest_probes(tight, k=1)
    cost = float(free["expected_saving_usd"].iloc[0]) / 3.0
    known = suggest_probes(tight, k=20, fallback_usd=cost)
    assert (known["expected_saving_usd"] <= cost + 1e-9).all()
    assert suggest_probes(tight, k=1, fallback_usd=0.0).empty  # nothing to save on a free run


def test_a_probe_said_on_demand_is_priced_on_demand_when_its_candidate_is_spot(small_model):
    # a list of spot rows only: the probe is still run (and said) on-demand, so its price is
    # the on-demand one, about 3x the spot one here (before: priced at the spot rate)
    _, deadline = _tight(small_model)
    spot = _decide(
        small_model,
        Constraints(deadline_h=deadline, spot=True),
        _listed().assign(pricing="spot"),
    )
    probes = suggest_probes(spot, k=3)
    assert not probes.empty
    catalog = load_catalog().set_index("instance_type")
    per_node = float(catalog.loc[TYPE, "ondemand_usd_per_hr"])
    evaluated = spot.sample(n=100)
    for probe in probes.itertuples():
        run = evaluated[evaluated["num_nodes"] == probe.num_nodes].iloc[0]
        hours = probe.steps * run["step_time_s"] / 3600 + LAUNCH_H
        assert probe.pricing == "on-demand"
        assert probe.cost_usd == pytest.approx(hours * probe.num_nodes * per_node, rel=1e-9)


def test_no_probe_when_nothing_it_could_show_would_change_the_decision(small_model):
    # one candidate, sure to meet the deadline: no measurement can change what to run
    only = search(
        small_model, load_catalog(), JOB, Constraints(deadline_h=10_000), candidates=_listed((1,))
    )
    assert only.feasible and only.pick["p_meet"] == pytest.approx(1.0)
    assert suggest_probes(only, k=1).empty
    assert "No short measurement" in probe_sentence(suggest_probes(only))


def test_the_probe_s_measurement_appended_to_the_table_lets_the_search_answer(small_model):
    tight, deadline = _tight(small_model)
    probe = suggest_probes(tight, k=1).iloc[0]
    # measure it: the synthetic cluster's true physics at that configuration
    truth = measurements(int(probe["num_nodes"]), min_nodes=int(probe["num_nodes"]), seed=3)
    truth = truth[
        (truth["num_workers"] == probe["num_workers"]) & (truth["local_bsz"] == probe["local_bsz"])
    ]
    assert len(truth) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = StepTimeModel().fit(pd.concat([measurements(2), truth], ignore_index=True))
    after = search(
        refit, load_catalog(), JOB, Constraints(deadline_h=deadline), candidates=_listed()
    )
    assert after.feasible


def test_bad_probe_arguments_are_refused(small_model):
    tight, _ = _tight(small_model)
    for bad in ({"k": 0}, {"steps": 0}, {"outcomes": 1.5}):
        with pytest.raises(InputError):
            suggest_probes(tight, **bad)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"seed": -1}, "seed must be a whole number >= 0"),  # numpy's ValueError
        ({"seed": "x"}, "seed must be a whole number >= 0"),  # numpy's TypeError
        ({"k": True}, "k must be a whole number"),  # pandas' TypeError
        ({"launch_h": -1.0}, "launch_h must be a finite number of hours >= 0"),  # cheaper
        ({"launch_h": float("nan")}, "launch_h must be a finite number"),  # none, silently
        ({"launch_h": "5m"}, "launch_h must be a finite number"),  # numpy's UFuncTypeError
        ({"result": None}, "result must be what search"),  # AttributeError
        ({"fallback_usd": -1.0}, "fallback_usd must be a finite number of dollars >= 0"),
        ({"fallback_usd": float("inf")}, "fallback_usd must be a finite number"),
        ({"fallback_usd": "342"}, "fallback_usd must be a finite number"),
    ],
)
def test_a_probe_argument_that_cannot_be_is_one_input_error(small_model, bad, words):
    tight, _ = _tight(small_model)
    args = {"result": tight, **bad}
    with pytest.raises(InputError, match=words) as err:
        suggest_probes(args.pop("result"), **args)
    assert "to fix" in str(err.value) and "\n" not in str(err.value)


def test_probe_counts_and_seeds_of_numpys_kind_are_numbers(small_model):
    tight, _ = _tight(small_model)
    expected = suggest_probes(tight, k=2, seed=1)
    assert suggest_probes(tight, k=np.int64(2), seed=np.int64(1)).equals(expected)


def test_the_probe_sentence_names_the_configuration_as_the_pick_is_named():
    probes = pd.DataFrame(
        {
            "instance_type": ["g6e.24xlarge"],
            "num_nodes": [1],
            "num_workers": [1],
            "local_bsz": [12],
            "pricing": ["on-demand"],
            "steps": [200],
            "cost_usd": [0.477],
            "expected_saving_usd": [110.4],
        }
    )
    assert probe_sentence(probes) == (
        "Measure 1 x g6e.24xlarge (1 worker x batch 12), on-demand, for 200 steps, about $0.48, "
        "to decide; expected saving $110."
    )


def test_a_probe_whose_saving_rounds_to_its_cost_shows_the_digits_that_tell_them_apart():
    # the demo said "about $0.04, to decide; expected saving $0.04": a probe whose saving
    # reads as its cost looks pointless, though it is suggested only when the saving is larger
    probes = pd.DataFrame(
        {
            "instance_type": ["g6.xlarge"],
            "num_nodes": [1],
            "num_workers": [1],
            "local_bsz": [64],
            "pricing": ["on-demand"],
            "steps": [200],
            "cost_usd": [0.0412],
            "expected_saving_usd": [0.0438],
        }
    )
    said = probe_sentence(probes)
    assert "about $0.041, to decide; expected saving $0.044." in said


def test_a_listed_type_without_a_gpu_is_refused_as_having_none_with_gpu_types_to_list(
    small_model,
):
    # before: "more workers than num_nodes x gpus_per_node can hold", as if the row were
    # miscounted, with nothing to say that a c5 has no GPU at all
    listed = pd.concat(
        [_listed((1,)), _listed((2,)).assign(instance_type="c5.xlarge", num_workers=2)],
        ignore_index=True,
    )
    with pytest.raises(InputError) as refused:
        search(small_model, load_catalog(), JOB, Constraints(), candidates=listed)
    said = str(refused.value)
    assert "instance type 'c5.xlarge' has no GPU" in said and "can hold" not in said
    assert "index 1:" in said  # the c5 row, by the DataFrame's index label
    fix = said.split("to fix: ")[1]
    # a GPU type of the same size is what was most likely meant
    assert "did you mean 'g5.xlarge'" in fix
    # a type sharing neither family nor size with any GPU type is given the nearest ones
    odd = _listed((1,)).assign(instance_type="m7i.large", num_workers=1)
    with pytest.raises(InputError, match="has no GPU") as refused:
        search(small_model, load_catalog(), JOB, Constraints(), candidates=odd)
    fix = str(refused.value).split("to fix: ")[1]
    assert "list a GPU instance type, e.g. '" in fix


def test_a_repeat_in_a_parquet_list_is_named_by_its_row_of_the_parquet_file(small_model, tmp_path):
    # before: "(rows 8)", numbered like a CSV's lines, for the seventh row (6, from 0)
    from srifty_kit.tables.files import read_table

    path = tmp_path / "listed.parquet"
    pd.concat([_listed(), _listed((1,))], ignore_index=True).to_parquet(path)
    with pytest.warns(UserWarning) as said:
        search(small_model, load_catalog(), JOB, Constraints(), candidates=read_table(path))
    (note,) = [str(w.message) for w in said if "repeating" in str(w.message)]
    assert "(rows 6 of the Parquet file, counted from 0)" in note
