"""What tests build and run: the repository, the installed command, synthetic measurements.

Test modules import these from here (``from tests.builders import ...``), never from each
other or from conftest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# the console script installed beside this interpreter: what a user runs
SRIFTY = str(Path(sys.executable).with_name("srifty"))


def run_srifty(*args: str, cwd=None, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
    """Run the installed ``srifty`` console script as a user would, capturing its output."""
    return subprocess.run(
        [SRIFTY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def synthetic_measurements(seed: int = 0) -> pd.DataFrame:
    """Ring all-reduce steps on two 4-GPU types, 1-2 nodes, three repeats, 2% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for itype, alpha, beta, intra, inter in (
        ("g4dn.12xlarge", 0.010, 0.0040, 0.010, 0.060),
        ("g6.12xlarge", 0.008, 0.0025, 0.008, 0.045),
    ):
        for nodes in (1, 2):
            for per in (1, 2, 4):
                n = nodes * per
                for bsz in (8, 16, 32, 64):
                    sync = (
                        0.0
                        if n == 1
                        else (
                            2 * (per - 1) / per * intra if nodes == 1 else 2 * (n - 1) / n * inter
                        )
                    )
                    for rep in range(3):
                        rows.append(
                            {
                                "model": "resnet",
                                "instance_type": itype,
                                "gpus_per_node": 4,
                                "num_nodes": nodes,
                                "num_workers": n,
                                "local_bsz": bsz,
                                "step_time_s": (alpha + beta * bsz + sync) * rng.lognormal(0, 0.02),
                                "repeat": rep,
                            }
                        )
    return pd.DataFrame(rows)
