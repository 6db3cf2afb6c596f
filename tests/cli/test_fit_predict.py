"""`srifty fit` and `srifty predict` through the installed console script."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from srifty_kit.model.physics import StepParams, simulate
from tests.builders import REPO, run_srifty

TRUE = StepParams(0.03, 0.004, 0.001, 0.02, 0.002, 0.15, 0.3, 1.0)


def srifty(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_srifty(*args, cwd=cwd, timeout=120)


def write_inputs(folder: Path, itype: str = "onprem-a100-box") -> tuple[Path, Path]:
    pairs = [(k, n) for k in (1, 2, 3) for n in range(k, 4 * k + 1)]
    k, n = (np.repeat(np.array(a), 3) for a in zip(*pairs, strict=True))
    b = np.tile([8, 16, 32], len(pairs))
    table = pd.DataFrame(simulate(TRUE, k, n, b)).assign(
        model="resnet", instance_type=itype, gpus_per_node=4
    )
    table[table["num_nodes"] <= 2].to_csv(folder / "measured.csv", index=False)
    table[table["num_nodes"] == 3].drop(columns=["step_time_s", "sync_time_s"]).assign(
        note="keep me"
    ).to_csv(folder / "configs.csv", index=False)
    return folder / "measured.csv", folder / "configs.csv"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    measured, _ = write_inputs(folder)
    done = srifty("fit", "--measurements", str(measured), "--out", "model.json", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slow
def test_fit_then_predict_writes_inputs_plus_interval(fitted):
    done = srifty(
        "predict",
        "--model",
        "model.json",
        "--configs",
        "configs.csv",
        "--level",
        "0.8",
        "--out",
        "pred.csv",
        cwd=fitted,
    )
    assert done.returncode == 0, done.stderr
    configs = pd.read_csv(fitted / "configs.csv")
    pred = pd.read_csv(fitted / "pred.csv")
    assert list(pred.columns[: len(configs.columns)]) == list(configs.columns)
    assert (pred["note"] == "keep me").all()
    assert (pred["step_time_lo"] <= pred["step_time_s"]).all()
    assert (pred["step_time_s"] <= pred["step_time_hi"]).all()
    # an instance type outside the catalog is fine when gpus_per_node is given
    assert set(pred["instance_type"]) == {"onprem-a100-box"}


@pytest.mark.slow
def test_predict_of_one_configuration_says_one_prediction(fitted, tmp_path):
    pd.read_csv(fitted / "configs.csv").head(1).to_csv(tmp_path / "one.csv", index=False)
    done = srifty(
        "predict", "--model", str(fitted / "model.json"), "--configs", "one.csv",
        "--out", "p.csv", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 1 prediction at level" in done.stdout, done.stdout


@pytest.mark.slow
def test_fit_prints_what_it_fitted(tmp_path):
    measured, _ = write_inputs(tmp_path)
    done = srifty("fit", "--measurements", str(measured), "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resnet" in done.stdout and "wrote m.json" in done.stdout
    # and where the interval widths come from: 1-2 nodes measured, so a prior beyond 2
    assert "intervals of resnet on onprem-a100-box: held out" in done.stdout
    assert "beyond 2 nodes a prior" in done.stdout
    assert json.loads((tmp_path / "m.json").read_text())["format"] == "srifty_kit.StepTimeModel"


@pytest.mark.slow
def test_fit_of_one_node_says_node_not_nodes(tmp_path):
    measured, _ = write_inputs(tmp_path)
    one = pd.read_csv(measured)
    one[one["num_nodes"] == 1].to_csv(tmp_path / "one.csv", index=False)
    done = srifty("fit", "--measurements", "one.csv", "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "beyond 1 node a prior" in done.stdout
    assert not re.search(r"\b1 nodes\b", done.stdout + done.stderr), done.stdout


@pytest.mark.slow
def test_fit_of_a_one_node_cluster_says_what_its_folds_held_out_on_one_node(tmp_path):
    from srifty_kit.tables.reference import shared_dir

    path = shared_dir() / "reference" / "measurements" / "sia_quadrtx6000_placements.csv"
    if not path.is_file():
        pytest.skip(f"reference measurements not found at {path} (set SRIFTY_SHARED)")
    done = srifty("fit", "--measurements", str(path), "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "workers on 1 node;" in done.stdout and "beyond 1 node a prior" in done.stdout
    assert not re.search(r"\b1 nodes\b", done.stdout + done.stderr), done.stdout


@pytest.mark.slow
def test_hand_edited_model_file_exits_2_with_one_line(fitted, tmp_path):
    doc = json.loads((fitted / "model.json").read_text())
    doc["groups"][0]["params"]["bw_inter"] = 0.0
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    done = srifty(
        "predict",
        "--model",
        "edited.json",
        "--configs",
        str(fitted / "configs.csv"),
        "--out",
        "p.csv",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "edited" in done.stderr and "srifty fit" in done.stderr
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.slow
def test_predicting_a_training_model_never_fitted_exits_2(fitted, tmp_path):
    configs = pd.read_csv(fitted / "configs.csv").assign(model="resnte")
    configs.to_csv(tmp_path / "c.csv", index=False)
    done = srifty(
        "predict",
        "--model",
        str(fitted / "model.json"),
        "--configs",
        "c.csv",
        "--out",
        "p.csv",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "did you mean 'resnet'" in done.stderr
    assert "c.csv" in done.stderr and "rows 2, 3" in done.stderr  # file and its lines


@pytest.mark.slow
def test_measurements_missing_a_column_exit_2_naming_it(tmp_path):
    measured, _ = write_inputs(tmp_path)
    pd.read_csv(measured).drop(columns="local_bsz").to_csv(tmp_path / "bad.csv", index=False)
    done = srifty("fit", "--measurements", "bad.csv", "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 2
    assert "local_bsz" in done.stderr and "bad.csv" in done.stderr
    assert not (tmp_path / "m.json").exists()


@pytest.mark.slow
def test_measurements_that_are_no_table_exit_2_saying_what_to_give(fitted, tmp_path):
    (tmp_path / "empty.csv").write_text("")
    for given in (str(fitted / "model.json"), "empty.csv"):
        done = srifty("fit", "--measurements", given, "--out", "m2.json", cwd=tmp_path)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "cannot be read as" in done.stderr
        assert "to fix: give the measurement table srifty profile writes" in done.stderr
        assert not (tmp_path / "m2.json").exists()


@pytest.mark.slow
def test_more_than_twenty_bad_rows_are_all_counted(tmp_path):
    measured, _ = write_inputs(tmp_path)
    table = pd.read_csv(measured).drop(columns="gpus_per_node").head(25)
    table.assign(instance_type="g4dn.12xlarg").to_csv(tmp_path / "bad.csv", index=False)
    done = srifty("fit", "--measurements", "bad.csv", "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "rows 2, 3, 4, 5, 6 (+20 more)" in line, line  # 25 bad rows: five shown, 20 more
    assert "did you mean 'g4dn.12xlarge'" in line


@pytest.mark.slow
def test_a_misspelt_instance_type_with_gpus_per_node_is_fitted_with_a_warning(tmp_path):
    measured, _ = write_inputs(tmp_path, itype="g4dn.12xlarg")
    done = srifty("fit", "--measurements", str(measured), "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # a type outside the catalog is not refused
    said = [line for line in done.stderr.splitlines() if "'g4dn.12xlarg'" in line]
    assert len(said) == 1, done.stderr  # once, not once per row
    assert "not in the catalog (did you mean 'g4dn.12xlarge'" in said[0]
    assert "measured.csv" in said[0]


@pytest.mark.slow
def test_help_describes_both_commands(tmp_path):
    for command in ("fit", "predict"):
        done = srifty(command, "--help", cwd=tmp_path)
        assert done.returncode == 0 and "--out" in done.stdout


# -- the catalog travels with the model ---------------------------------------------------------
def write_catalog(path: Path, fp32: float = 8.1) -> Path:
    """Two machines only this file knows: a T4 box (measured) and a V100 box (never)."""
    base = {
        "region": "onprem",
        "vcpus": 32,
        "memory_gib": 128.0,
        "gpu_count": 4,
        "gpu_memory_gib": 16.0,
        "network_gbps": 25.0,
        "efa_supported": False,
        "ondemand_usd_per_hr": 3.0,
        "spot_usd_per_hr": 1.0,
        "spot_interruption_bucket": "<5%",
        "source": "vendor datasheets (test)",
    }
    rows = [
        {
            **base,
            "instance_type": "onprem-t4-box",
            "gpu_model": "T4",
            "gpu_fp16_tflops": 65.0,
            "gpu_fp32_tflops": fp32,
            "gpu_mem_bw_gbps": 320.0,
        },
        {
            **base,
            "instance_type": "onprem-v100-box",
            "gpu_model": "V100",
            "gpu_fp16_tflops": 125.0,
            "gpu_fp32_tflops": 15.7,
            "gpu_mem_bw_gbps": 900.0,
        },
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def write_single_gpu(folder: Path) -> tuple[Path, Path]:
    """A user's own one-GPU steps of the T4 box (no gradient size), and configs of the V100 box."""
    b = np.array([8, 16, 32, 64, 128, 256])
    step = (0.03**1.5 + (0.002 * b) ** 1.5) ** (1 / 1.5)  # a floor, then linear
    pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "onprem-t4-box",
            "gpus_per_node": 4,
            "num_nodes": 1,
            "num_workers": 1,
            "local_bsz": b,
            "step_time_s": step,
        }
    ).to_csv(folder / "measured.csv", index=False)
    pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "onprem-v100-box",
            "num_nodes": 1,
            "num_workers": [1, 1, 4],
            "local_bsz": [16, 512, 64],
        }
    ).to_csv(folder / "configs.csv", index=False)
    return folder / "measured.csv", folder / "configs.csv"


@pytest.fixture(scope="module")
def onprem(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("onprem")
    write_single_gpu(folder)
    write_catalog(folder / "catalog.csv")
    done = srifty(
        "fit",
        "--measurements",
        "measured.csv",
        "--catalog",
        "catalog.csv",
        "--out",
        "m.json",
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slow
def test_a_catalog_given_to_fit_carries_the_model_to_a_type_only_it_knows(onprem):
    kept = json.loads((onprem / "m.json").read_text())["catalog_rows"]
    assert [r["instance_type"] for r in kept] == ["onprem-t4-box"]
    configs = pd.read_csv(onprem / "configs.csv").iloc[:2]  # one worker each
    configs.to_csv(onprem / "one.csv", index=False)
    args = ("predict", "--model", "m.json", "--configs", "one.csv", "--out", "p.csv")
    done = srifty(*args, "--catalog", "catalog.csv", cwd=onprem)
    assert done.returncode == 0, done.stderr
    pred = pd.read_csv(onprem / "p.csv")
    assert (pred["step_time_lo"] <= pred["step_time_s"]).all()
    assert pred["step_time_s"].iloc[1] > pred["step_time_s"].iloc[0]
    # without the catalog the V100 box is unknown: one line, exit 2
    done = srifty(*args, cwd=onprem)
    assert done.returncode == 2 and "not in the catalog" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_one_gpu_steps_without_gradient_size_refuse_only_configs_that_synchronise(onprem):
    done = srifty(
        "predict",
        "--model",
        "m.json",
        "--configs",
        "configs.csv",
        "--catalog",
        "catalog.csv",
        "--out",
        "all.csv",
        cwd=onprem,
    )
    assert done.returncode == 2
    assert "grad_bytes" in done.stderr and "rows 4" in done.stderr  # line 4 of configs.csv
    assert "one-worker" in done.stderr and not (onprem / "all.csv").exists()


@pytest.mark.slow
def test_a_catalog_that_contradicts_the_model_file_exits_2_naming_type_and_column(onprem):
    write_catalog(onprem / "other.csv", fp32=9.9)
    done = srifty(
        "predict",
        "--model",
        "m.json",
        "--configs",
        "configs.csv",
        "--catalog",
        "other.csv",
        "--out",
        "x.csv",
        cwd=onprem,
    )
    assert done.returncode == 2, done.stderr
    assert "onprem-t4-box" in done.stderr and "gpu_fp32_tflops" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = srifty(
        "search",
        "--model",
        "m.json",
        "--workload",
        "resnet",
        "--samples",
        "1e6",
        "--catalog",
        "other.csv",
        "--region",
        "onprem",
        cwd=onprem,
    )
    assert done.returncode == 2, done.stderr
    assert "onprem-t4-box" in done.stderr and "gpu_fp32_tflops" in done.stderr


# -- profile facts: the op mix carries the model to GPUs never measured -------------------------
GPU_NEVER_MEASURED = "g4dn.xlarge"


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory) -> Path:
    """mlp's CPU steps (this project's own profile) and its facts from a meta-device pass."""
    folder = tmp_path_factory.mktemp("facts")
    steps = pd.read_csv(REPO / "data" / "sample_profile_single.csv")
    steps[steps["model"] == "mlp"].to_csv(folder / "steps.csv", index=False)
    done = srifty(
        "profile", "--facts-only", "--model", "mlp", "--out", "mlp.facts.json", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    return folder


def _route(model_file: Path) -> str:
    from srifty_kit.model.estimator import StepTimeModel

    configs = pd.DataFrame(
        {
            "model": ["mlp"],
            "instance_type": [GPU_NEVER_MEASURED],
            "num_nodes": [1],
            "num_workers": [1],
            "local_bsz": [32],
        }
    )
    return StepTimeModel.load(model_file).explain(configs)["route"].iloc[0]


@pytest.mark.slow
def test_fit_with_facts_carries_an_unmeasured_gpu_by_the_op_mix(cpu_profile):
    args = ("fit", "--measurements", "steps.csv")
    done = srifty(*args, "--facts", "mlp.facts.json", "--out", "with.json", cwd=cpu_profile)
    assert done.returncode == 0, done.stderr
    assert "op mix of mlp from mlp.facts.json" in done.stdout
    assert _route(cpu_profile / "with.json") == "roofline (op graph alone)"
    # the same steps without facts go by the FLOP count: the facts are what changed the route
    done = srifty(*args, "--out", "without.json", cwd=cpu_profile)
    assert done.returncode == 0, done.stderr
    assert "roofline" not in _route(cpu_profile / "without.json")


@pytest.mark.slow
def test_fit_reads_the_facts_profile_wrote_beside_the_table(cpu_profile, tmp_path):
    (tmp_path / "steps.csv").write_bytes((cpu_profile / "steps.csv").read_bytes())
    (tmp_path / "steps.facts.json").write_bytes((cpu_profile / "mlp.facts.json").read_bytes())
    done = srifty("fit", "--measurements", "steps.csv", "--out", "m.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "op mix of mlp from steps.facts.json" in done.stdout
    assert _route(tmp_path / "m.json") == "roofline (op graph alone)"
    done = srifty(
        "fit", "--measurements", "steps.csv", "--no-facts", "--out", "n.json", cwd=tmp_path
    )
    assert done.returncode == 0 and "op mix" not in done.stdout
    assert "roofline" not in _route(tmp_path / "n.json")
    # the facts beside the table are an input: the model may not be written over them
    done = srifty("fit", "--measurements", "steps.csv", "--out", "steps.facts.json", cwd=tmp_path)
    assert done.returncode == 2 and "--out" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert json.loads((tmp_path / "steps.facts.json").read_text())["model"] == "mlp"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (None, "No such file"),
        ("{not json", "cannot read the profile facts"),
        ("[1, 2]", "found a list"),
        ('{"op_mix": {"tensor": {"flops_per_sample": 1}}}', "name no training model"),
        ('{"model": "mlp", "op_mix": {"tensor": {"flops_per_sample": -1}}}', "not a number"),
        ('{"mlp": 3}', "not a JSON object"),
        ('{"model": "mlp", "op_trace": {"batches": {"8": {"step_s": 1}}}}', "op trace of mlp"),
    ],
)
def test_a_bad_facts_file_exits_2_with_one_line(cpu_profile, tmp_path, text, needle):
    if text is not None:
        (tmp_path / "bad.facts.json").write_text(text)
    done = srifty(
        "fit",
        "--measurements",
        str(cpu_profile / "steps.csv"),
        "--facts",
        "bad.facts.json",
        "--out",
        "m.json",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "bad.facts.json" in done.stderr and needle in done.stderr
    assert "to fix:" in done.stderr and not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("itype", ["onprem-a100-box", "g4dn.12xlarge"])
def test_a_node_holding_more_gpus_than_its_type_is_refused_in_one_line(tmp_path, itype):
    # 8 workers on one node of a 4-GPU type: the catalog's count (g4dn.12xlarge) or, for a
    # type outside it, the count it was fitted with (the runs' 4) says the node cannot hold them
    measured, _ = write_inputs(tmp_path, itype)
    done = srifty("fit", "--measurements", str(measured), "--out", "model.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pd.DataFrame(
        {
            "model": ["resnet", "resnet"],
            "instance_type": [itype, itype],
            "num_nodes": [1, 1],
            "num_workers": [4, 8],
            "local_bsz": [16, 16],
            "gpus_per_node": [4, 8],
        }
    ).to_csv(tmp_path / "eight.csv", index=False)
    args = ("--model", "model.json", "--configs", "eight.csv", "--out", "pred.csv")
    done = srifty("predict", *args, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "eight.csv, column 'gpus_per_node', rows 3: gpus_per_node 8" in line
    assert "give gpus_per_node 4" in line
    assert not (tmp_path / "pred.csv").exists()
