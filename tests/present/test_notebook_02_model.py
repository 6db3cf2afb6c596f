"""notebooks/02_performance_model.ipynb runs headless under papermill on a tiny table."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from srifty_kit.model.physics import StepParams, simulate
from tests.builders import run_notebook


def write_measurements(path) -> None:
    truth = StepParams(0.03, 0.004, 0.001, 0.02, 0.002, 0.15, 0.3, 1.2)
    pairs = [(k, n) for k in (1, 2, 3) for n in range(k, 4 * k + 1)]
    k, n = (np.repeat(np.array(a), 3) for a in zip(*pairs, strict=True))
    b = np.tile([8, 16, 32], len(pairs))
    table = pd.DataFrame(simulate(truth, k, n, b, noise=0.03)).assign(
        model="resnet", instance_type="g4dn.12xlarge", gpus_per_node=4
    )
    table.to_csv(path, index=False)


@pytest.mark.slow
def test_notebook_fits_predicts_held_out_nodes_and_draws_three_figures(tmp_path):
    write_measurements(tmp_path / "m.csv")
    nb = run_notebook(
        "02_performance_model",
        tmp_path,
        measurements_path=str(tmp_path / "m.csv"),
        training_model="resnet",
        level=0.8,
    )
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    found = re.search(
        r"held-out MAPE ([\d.]+)%; (\d+)% of steps inside the 80% interval, "
        r"(\d+)% above it, (\d+)% below",
        text,
    )
    assert found, text
    assert float(found.group(1)) < 10.0  # the table follows the model's own physics
    # every held-out step is inside, above or below (each share rounded to a percent)
    assert abs(sum(int(found.group(i)) for i in (2, 3, 4)) - 100) <= 1
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3
    # the fitting error is said in percent, beside what it measures
    assert re.search(r"held_out_error [\d.]+ = \d+%, the typical miss", text), text
    # and the interval's reach each way, with why it leans
    assert re.search(r"the 80% interval reaches \d+% below the point and \d+% above it", text)
    assert "quantiles of the errors the fit made predicting its own larger" in text, text
    # the summary shows what its line points at: interval_from whole (pandas cut it at 50
    # characters, "... 5-12 workers on 3 nodes; <=7 -..."), the error as the line writes it
    summary = next(
        o["data"]["text/html"]
        for o in outputs
        if "interval_from" in o.get("data", {}).get("text/html", "")
    )
    cells = [html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", summary, re.S)]
    froms = [c for c in cells if c.startswith("held out")]
    assert froms and not any(c.endswith("...") for c in froms), cells
    assert len(max(froms, key=len)) > 50, froms  # the case that was cut
    said = re.search(r"held_out_error ([\d.]+) = ", text).group(1)
    assert said in cells, (said, cells)  # 0.42 in the line, 0.42 in the table (not 0.421799)


@pytest.mark.slow
def test_a_profile_of_one_machine_is_scored_in_sample_not_called_held_out(tmp_path):
    # what notebook 01 writes: one node, one worker, several batch sizes, every step a row
    rng = np.random.default_rng(0)
    steps = [(b, t) for b in (4, 8, 16) for t in 0.01 * b * rng.lognormal(0, 0.05, 60)]
    pd.DataFrame(steps, columns=["local_bsz", "step_time_s"]).assign(
        model="mine", instance_type="local-cpu", num_nodes=1, num_workers=1, gpus_per_node=1
    ).to_csv(tmp_path / "p.csv", index=False)
    nb = run_notebook(
        "02_performance_model", tmp_path, measurements_path="p.csv", training_model="mine"
    )
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "held-out MAPE" not in text
    assert "nothing held out (no configuration above 1 node)" in text, text
    assert "in-sample MAPE" in text


def test_a_training_model_the_table_lacks_is_named_with_the_ones_it_holds(tmp_path):
    import papermill

    write_measurements(tmp_path / "m.csv")
    with pytest.raises(papermill.PapermillExecutionError) as err:
        run_notebook(
            "02_performance_model", tmp_path, measurements_path="m.csv", training_model="resnt"
        )
    assert err.value.ename == "InputError"
    assert "no rows of training model 'resnt' (did you mean 'resnet'?)" in err.value.evalue


@pytest.mark.slow
def test_two_batch_sizes_of_as_many_steps_each_are_broken_down_at_one_that_ran(tmp_path):
    # a loose target stops every batch size at the fewest steps: rows split evenly, and
    # the median of the rows' batch sizes (12) is none that was run
    rng = np.random.default_rng(1)
    steps = [(b, t) for b in (8, 16) for t in 0.01 * b * rng.lognormal(0, 0.05, 20)]
    pd.DataFrame(steps, columns=["local_bsz", "step_time_s"]).assign(
        model="mine", instance_type="local-cpu", num_nodes=1, num_workers=1, gpus_per_node=1
    ).to_csv(tmp_path / "p.csv", index=False)
    nb = run_notebook(
        "02_performance_model", tmp_path, measurements_path="p.csv", training_model="mine"
    )
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3
