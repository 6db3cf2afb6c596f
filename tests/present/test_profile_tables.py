"""Notebook 01's drift table says what was flagged, tested and not tested, in every cell."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from srifty_kit.measure import variance
from srifty_kit.present.profile_tables import profile_table, shift_sentence
from srifty_kit.tables.reference import packaged

SHOWN = ["local_bsz", "n", "warmup_steps", "drift", "shift", "shift_at", "shift_p", "verdict"]


def _drift(model: str) -> pd.DataFrame:
    """detect_drift over one model's steps of the sample profile (made by the kit's profiler)."""
    steps = pd.read_csv(packaged("sample_profile_single.csv"))
    return variance.detect_drift(steps[steps["model"] == model])[SHOWN]


def _cells(styler) -> dict[int, dict[str, str]]:
    """The rendered table: batch size -> column -> the text of its cell."""
    html = styler.to_html()
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)[1:]  # the header row first
    out = {}
    for row in rows:
        texts = [t.strip() for t in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        cells = dict(zip(styler.data.columns, texts, strict=True))
        out[int(cells["local_bsz"])] = cells
    return out


def test_a_run_where_nothing_drifted_says_so_and_fills_every_cell():
    drift = _drift("mlp")  # every batch size tested, none flagged
    assert not drift["drift"].any() and drift["shift_p"].notna().all()
    styler = profile_table(drift)
    said = shift_sentence(drift)
    assert said.startswith("No level shift at batch sizes 8, 32 and 128")
    assert "largest change of level the test found" in said
    assert said in styler.to_html()  # the caption above the table
    for bsz, cells in _cells(styler).items():
        assert cells["drift"] == "no", bsz
        assert all(v and v.lower() not in ("nan", "none", "—") for v in cells.values()), cells
        assert re.fullmatch(r"[+-]\d+\.\d%", cells["shift"]), cells
        assert re.fullmatch(r"\d+", cells["shift_at"]), cells


def test_a_flagged_shift_is_named_and_untested_batch_sizes_say_not_tested():
    drift = _drift("transformer")  # 32 flagged, 16 tested, 4 and 8 too short to test
    flagged = drift[drift["drift"]].iloc[0]
    cells = _cells(profile_table(drift))
    assert [cells[b]["drift"] for b in (4, 8, 16, 32)] == ["not tested"] * 2 + ["no", "yes"]
    assert cells[32]["shift"] == f"{flagged['shift']:+.1%}"
    assert cells[32]["shift_at"] == str(int(flagged["shift_at"]))
    for bsz in (4, 8):  # no test, so no number: a dash, never 'nan' or an empty cell
        assert [cells[bsz][c] for c in ("shift", "shift_at", "shift_p")] == ["—"] * 3
    said = shift_sentence(drift)
    assert said.startswith(
        f"Level shift at batch size 32: {flagged['shift']:+.1%} at step {int(flagged['shift_at'])}"
    )
    assert "No shift at batch size 16." in said
    assert "Not tested at batch sizes 4 and 8: fewer than 20 steps" in said


def test_the_table_itself_is_left_as_data():
    drift = _drift("transformer")
    styler = profile_table(drift)
    pd.testing.assert_frame_equal(styler.data, drift)


def test_configurations_that_batch_size_cannot_tell_apart_are_counted():
    steps = pd.read_csv(packaged("sample_profile_single.csv"))
    drift = variance.detect_drift(steps)  # three models share batch sizes 4, 8, 16, 32
    said = shift_sentence(drift)
    assert "batch size" not in said
    assert "Level shift in 1 configuration: " in said
    assert "No shift in 7 configurations." in said
    assert "Not tested in 3 configurations" in said


def _seconds(text: str) -> float:
    """'0.865 ms' or '1.21 s' back to seconds."""
    number, unit = text.split()
    return float(number) * {"ms": 1e-3, "s": 1.0}[unit]


def test_step_times_carry_their_unit_and_shares_read_as_percents():
    steps = pd.read_csv(packaged("sample_profile_single.csv"))
    stats = variance.describe(steps[steps["model"] == "mlp"], level=0.95)
    cells = _cells(profile_table(stats[["local_bsz", "n_eff", "mean", "p95_hi", "cv"]]))
    for row in stats.itertuples():
        shown = cells[row.local_bsz]
        for column in ("mean", "p95_hi"):  # to three significant digits, in its unit
            assert _seconds(shown[column]) == pytest.approx(getattr(row, column), rel=5e-3)
        assert shown["cv"] == f"{row.cv:.1%}"
        assert shown["n_eff"] == f"{row.n_eff:.1f}"


def test_steps_needed_are_whole_and_an_unreachable_target_is_a_dash():
    steps = pd.read_csv(packaged("sample_profile_single.csv"))
    plan = variance.plan_samples(steps[steps["model"] == "mlp"], target_precision=0.01)
    plan.loc[plan.index[-1], "n_needed"] = float("inf")
    cells = _cells(profile_table(plan[["local_bsz", "precision", "n_needed", "n_more"]]))
    first = plan.iloc[0]
    assert cells[first["local_bsz"]]["n_more"] == f"{first['n_more']:,.0f}"
    assert cells[plan.iloc[-1]["local_bsz"]]["n_needed"] == "—"
    assert all(c["precision"].endswith("%") for c in cells.values())


def test_the_fit_summary_is_shown_whole_and_says_what_could_not_be_held_out():
    from srifty_kit.present.profile_tables import summary_table

    basis = "held out <=3 -> 4-8 workers on 2 nodes; <=5 -> 6-12 workers on 3 nodes"
    summary = pd.DataFrame(
        {
            "model": ["bert", "mine"],
            "held_out_error": [0.421799, float("nan")],
            "interval_from": [basis, "in sample"],
            "fixed": ["", "latency (one node)"],
        }
    )
    shown = summary_table(summary).to_html()
    assert basis in shown  # a displayed DataFrame cut it to "... 2 nodes; <=5 -..."
    assert ">0.42<" in shown and "0.421799" not in shown
    assert ">—<" in shown and "nan" not in shown.lower()
    assert ">none<" in shown  # no term fixed, said, not an empty cell
