"""notebooks/02_performance_model.ipynb runs headless under papermill on a tiny table."""

from __future__ import annotations

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
