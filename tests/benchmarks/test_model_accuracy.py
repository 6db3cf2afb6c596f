"""The model-accuracy benchmark's own arithmetic: the floor it claims and its stress test."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.builders import benchmark


@pytest.fixture(scope="module")
def bench():
    return benchmark("model_accuracy")


def _rows(*rows):
    columns = ["model", "num_nodes", "placement", "local_bsz", "step_time_s"]
    return pd.DataFrame(rows, columns=columns)


def test_floor_counts_only_larger_clusters_that_ran_faster_than_a_contained_one(bench):
    train = _rows(
        ("m", 2, "44", 8, 2.0),
        ("m", 2, "11", 8, 1.0),
        ("m", 1, "4", 8, 0.5),  # not the largest fitted node count: ignored
    )
    test = _rows(
        ("m", 3, "444", 8, 1.0),  # holds 44 (2.0 s) but ran in 1.0 s: any monotone model errs 100%
        ("m", 3, "111", 8, 2.0),  # holds only 11 (1.0 s) and is slower: no forced error
        ("m", 3, "444", 16, 1.0),  # no measured cluster at this batch: no constraint
    )
    assert bench.monotone_bound(train, test)["m"] == pytest.approx(1.0 / 3)
    # with 3% slack the forced error shrinks to (0.97 * 2.0 - 1.0) / 1.0
    assert bench.monotone_bound(train, test, 0.03)["m"] == pytest.approx(0.94 / 3)


def test_placement_containment_is_node_by_node(bench):
    assert bench._contains((4, 4), (4, 4, 1))
    assert bench._contains((2, 1), (3, 1))
    assert not bench._contains((4, 4), (4, 3, 3))  # the second node is not as full
    assert not bench._contains((1, 1, 1), (4, 4))  # fewer nodes cannot hold more
    assert bench._nodes_sorted(1324) == (4, 3, 2, 1)  # pandas reads placements as integers


def test_shifted_coverage_moves_the_sync_part_by_the_last_node_count_move(bench):
    pred = pd.DataFrame({"step_time_lo": [0.9, 0.9], "step_time_hi": [1.3, 1.3]})
    held = pd.DataFrame({"step_time_s": [1.0, 1.0], "sync_time_s": [0.0, 0.5]})
    network = pd.Series({2: 1.0, 3: 0.5, 4: 0.5})  # 2 -> 3 nodes halved the time per byte
    faster, slower = bench._shifted_coverage(pred, held, network, fit_nodes=3)
    # faster: 1.0 + 0.5 * (0.5 - 1) = 0.75 leaves the interval; slower: 1.0 + 0.5 = 1.5 too
    assert (faster, slower) == (0.5, 0.5)
    # a fit on 1-2 nodes saw no move between two multi-node counts: nothing to replay
    assert all(v != v for v in bench._shifted_coverage(pred, held, network, fit_nodes=2))


def test_each_cluster_s_node_move_prior_is_learned_without_its_own_rows(bench):
    import numpy as np

    def moves(a_shift: float) -> pd.DataFrame:
        rng = np.random.default_rng(0)  # the same B and C rows every time
        parts = []
        for cluster, centre, count in (("A", a_shift, 30), ("B", 0.2, 10), ("C", -0.1, 90)):
            for model in ("m1", "m2", "m3", "m4"):
                x = centre + rng.normal(0, 0.05) + rng.normal(0, 0.02, count)
                parts.append(
                    pd.DataFrame(
                        {
                            "cluster": cluster,
                            "model": model,
                            "move": "1-2 -> 3",
                            "log_ratio": 0.5 * x,
                        }
                    )
                )
        return pd.concat(parts, ignore_index=True).assign(share=0.5, doublings=1.0)

    calm, wild = bench.node_move_priors(moves(0.0)), bench.node_move_priors(moves(3.0))
    # A's own rows never reach A's prior; they do reach the shipped one ("all")
    assert bench.as_prior(calm["A"]) == bench.as_prior(wild["A"])
    assert wild["all"].between_types > calm["all"].between_types + 0.2
    # B and C weigh the same whatever their row counts: A's centre lies midway between them
    assert calm["A"].centre == pytest.approx(0.05, abs=0.05)
    assert calm["A"].source == "B and C"
