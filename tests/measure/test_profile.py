"""profile_model: every step kept, adaptive stopping, model facts, bad input, interruption."""

from __future__ import annotations

import json
import signal

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from srifty_kit import InputError, errors
from srifty_kit.errors import plain
from srifty_kit.measure.profile import (
    BudgetWarning,
    ProfileWarning,
    budget_note,
    check_batch_sizes,
    facts_path,
    profile_model,
    profile_spec,
)
from srifty_kit.measure.variance import precision
from srifty_kit.measure.zoo import DEMO_MODELS, load_spec
from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import read_table

FAST = {"progress": False, "warmup": 1, "noise_repeats": 4}


def _linear_spec(widths=(8, 16, 4)):
    torch.manual_seed(0)
    layers = [nn.Linear(a, b) for a, b in zip(widths, widths[1:], strict=False)]
    model = nn.Sequential(*layers)

    def make_batch(b):
        return torch.randn(b, widths[0]), torch.randint(0, widths[-1], (b,))

    return model, make_batch, nn.CrossEntropyLoss(), lambda p: torch.optim.SGD(p, lr=0.01)


@pytest.fixture(scope="module")
def mlp_result():
    # the noise scale gets its own second, so the two batch sizes share all 3 s of timing
    return profile_spec(
        "mlp", [4, 8], max_seconds=3, target_precision=0.05, noise_seconds=1, **FAST
    )


def test_every_step_is_a_row_of_the_measurement_table(mlp_result):
    table = mlp_result.measurements
    validated = validate_measurements(table)
    assert len(validated) == len(table) == mlp_result.summary["n"].sum()
    assert set(table["local_bsz"]) == {4, 8}
    assert (table["step_time_s"] > 0).all()
    assert (table[["num_nodes", "num_workers"]] == 1).all().all()
    for col in (
        "gpus_per_node",
        "timestamp",
        "host",
        "repeat",
        "instance_type",
        "device",
        "flops_per_sample",
        "param_count",
        "grad_bytes",
        "run",
        "warmup",
    ):
        assert table[col].notna().all(), col
    assert table["run"].nunique() == 1  # one call, one run
    # repeat numbers each batch size's steps 0..n-1 in order
    for _, group in table.groupby("local_bsz"):
        assert list(group["repeat"]) == list(range(len(group)))


def test_warmup_steps_are_kept_and_marked_and_the_summary_says_how_many(mlp_result):
    table = mlp_result.measurements
    for row in mlp_result.summary.itertuples():
        marks = table.query("local_bsz == @row.local_bsz")["warmup"].to_numpy()
        assert marks.sum() == row.warmup_steps <= row.n // 2 + 5
        assert not marks[row.warmup_steps :].any()  # the first steps, and only those
        kept = table.query("local_bsz == @row.local_bsz and not warmup")["step_time_s"]
        assert row.mean == pytest.approx(kept.mean())
        assert 0 < row.n_eff and row.interval == "batch_means"
        assert row.drift in (True, False)
    assert mlp_result.facts["interval"] == "batch_means"
    assert mlp_result.facts["warmup_rule"] == "MSER-5"


def test_summary_precision_is_the_stopping_rules_interval_of_the_steps(mlp_result):
    for row in mlp_result.summary.itertuples():
        steps = mlp_result.measurements.query("local_bsz == @row.local_bsz")["step_time_s"]
        assert row.precision == pytest.approx(precision(steps.to_numpy()))
        if row.n < 2:  # a busy machine can leave one step in the budget: no interval, said so
            assert np.isnan(row.mean_lo) and np.isnan(row.mean_hi) and row.precision == np.inf
            continue
        assert row.mean_lo <= row.mean <= row.mean_hi
        if row.stop_reason == "precision reached":
            assert row.precision <= 0.05 and row.n >= 10


def test_loose_target_stops_on_precision_and_tight_target_on_time():
    # a tiny model: thousands of steps a second, enough for the batch-means interval to settle
    # even when other jobs stall some of them; the budget only bounds a stalled machine (a
    # fresh clone's test run beside a 2-process DDP demo once needed more than 20 s, and one
    # beside a benchmark and another test run more than 60 s); a quiet one stops in about 1 s
    loose = profile_model(*_linear_spec(), [4], target_precision=0.5, max_seconds=300, **FAST)
    assert loose.summary.loc[0, "stop_reason"] == "precision reached"
    assert loose.summary.loc[0, "n"] >= 10  # never fewer than min_steps
    assert loose.summary.loc[0, "precision"] <= 0.5
    tight = profile_spec("mlp", [4], target_precision=1e-6, max_seconds=1, **FAST)
    assert tight.summary.loc[0, "stop_reason"] == "time budget"
    assert tight.summary.loc[0, "precision"] > 1e-6


def test_a_budget_too_small_keeps_the_rows_and_warns_what_budget_would_do():
    model, make_batch, loss, opt = _linear_spec()
    with pytest.warns(BudgetWarning, match=r"ran out before the target precision \(\+-2%\) at"):
        result = profile_model(
            model, make_batch, loss, opt, [4, 8], max_seconds=1e-3, noise_seconds=0.2, **FAST
        )
    assert set(result.measurements["local_bsz"]) == {4, 8}  # the rows are kept
    short = result.facts["budget_short"]
    assert short["batch_sizes"] == [4, 8] and short["steps"] == [1, 1]
    assert short["fewest_steps"] == 20  # MIN_BATCHES batch means of one step at least
    # the fewest steps the rule stops on (and the warm-up step) at the step times measured
    assert short["max_seconds_needed"] >= 21 * result.summary["mean"].sum()
    note = budget_note(short, "--max-seconds {}")
    assert "batch sizes 4 (1 step), 8 (1 step)" in note
    assert f"give --max-seconds {plain(short['max_seconds_needed'])} or more" in note
    loose = profile_model(*_linear_spec(), [4], target_precision=0.5, max_seconds=300, **FAST)
    assert "budget_short" not in loose.facts  # reached: nothing to say


def test_the_iid_rule_is_still_there_on_request():
    old = profile_spec("mlp", [4], target_precision=0.2, max_seconds=2, interval="iid", **FAST)
    row = old.summary.iloc[0]
    steps = old.measurements["step_time_s"].to_numpy()
    assert row.interval == "iid" and row.warmup_steps == 0 and row.n_eff == row.n
    assert row.precision == pytest.approx(precision(steps, interval="iid"))
    assert not old.measurements["warmup"].any()
    with pytest.raises(InputError, match="unknown interval 't'"):
        profile_spec("mlp", [4], interval="t", **FAST)


def test_flops_params_and_grad_bytes_of_a_linear_stack():
    widths = (8, 16, 4)
    model, make_batch, loss, opt = _linear_spec(widths)
    result = profile_model(model, make_batch, loss, opt, [2, 4], max_seconds=1, **FAST)
    fwd = sum(2 * a * b for a, b in zip(widths, widths[1:], strict=False))
    # backward: weight gradients (= forward) and input gradients of every layer but the first
    bwd = fwd + sum(2 * a * b for a, b in zip(widths[1:], widths[2:], strict=False))
    assert result.flops_per_sample == fwd + bwd
    params = sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))
    assert result.param_count == params
    assert result.grad_bytes == 4 * params
    assert (result.measurements["flops_per_sample"] == fwd + bwd).all()


def test_cpu_memory_peak_and_extrapolated_largest_batch():
    result = profile_spec(
        "cnn", [2, 16], max_seconds=3, target_precision=0.2, memory_budget_bytes=8 * 2**30, **FAST
    )
    assert (result.summary["peak_memory_bytes"] > 0).all()
    assert result.max_batch_method == "extrapolation of peak memory"
    assert result.memory_budget_bytes == 8 * 2**30
    if result.max_batch_size is not None:  # growth is measurable: the fit must honour it
        predicted = result.memory_base_bytes + result.memory_bytes_per_sample * (
            result.max_batch_size
        )
        assert predicted <= 8 * 2**30


def test_noise_batch_sizes_must_be_two_different_sizes():
    with pytest.raises(InputError, match="not two different sizes"):
        profile_spec("mlp", [4], noise_batch_sizes=(8, 8), **FAST)


def test_noise_scale_is_reported_with_its_spread(mlp_result):
    f = mlp_result.facts
    assert f["noise_scale_batch_sizes"] == [4, 8]
    assert f["noise_scale_repeats"] >= 2
    assert f["noise_scale"] is None or f["noise_scale"] > 0
    assert "noise_scale_std" in f and "noise_scale_lo" in f and "noise_scale_hi" in f


def test_weights_are_restored_after_profiling():
    spec = load_spec("mlp")
    before = {k: v.clone() for k, v in spec.model.state_dict().items()}
    profile_spec(spec, [4], max_seconds=1, target_precision=0.3, **FAST)
    after = spec.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_result_saves_table_and_facts_atomically(tmp_path, mlp_result):
    table_path, json_path = mlp_result.save(tmp_path / "p.parquet")
    assert json_path == facts_path(table_path) == tmp_path / "p.facts.json"
    back = read_table(table_path)
    pd.testing.assert_series_equal(back["step_time_s"], mlp_result.measurements["step_time_s"])
    facts = json.loads(json_path.read_text())
    for key in (
        "flops_per_sample",
        "param_count",
        "grad_bytes",
        "noise_scale",
        "noise_scale_std",
        "max_batch_size",
        "max_batch_method",
        "summary",
    ):
        assert key in facts
    assert [s["local_bsz"] for s in facts["summary"]] == [4, 8]
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


@pytest.mark.parametrize("sizes", [[], [0], [-4], [2.5], [True], ["8"]])
def test_bad_batch_sizes_are_input_errors(sizes):
    with pytest.raises(InputError, match="batch size|no batch sizes"):
        profile_spec("mlp", sizes, **FAST)


def test_loss_that_is_not_a_scalar_is_an_input_error():
    model, make_batch, _, opt = _linear_spec()
    per_sample = nn.CrossEntropyLoss(reduction="none")
    with pytest.raises(InputError, match="not a scalar tensor.*mean"):
        profile_model(model, make_batch, per_sample, opt, [4], max_seconds=1, **FAST)


def test_a_nan_loss_is_said_and_the_noise_scale_says_why_it_is_missing():
    model, make_batch, loss, opt = _linear_spec()

    def nan_loss(out, target):
        return loss(out, target) * float("nan")

    with pytest.warns(ProfileWarning, match="loss at batch size 4 is nan"):
        result = profile_model(model, make_batch, nan_loss, opt, [4, 8], max_seconds=1, **FAST)
    assert len(result.measurements) > 0  # the steps are timed all the same
    assert result.facts["noise_scale"] is None
    assert "not finite" in result.facts["noise_scale_note"]
    assert "take more repeats" not in result.facts["noise_scale_note"]


def test_batch_maker_failing_at_one_size_is_reported_and_the_others_measured():
    model, make_batch, loss, opt = _linear_spec()

    def picky(b):
        if b == 8:
            raise ValueError("no data for 8")
        return make_batch(b)

    with pytest.warns(ProfileWarning, match="batch size 8.*no data for 8"):
        result = profile_model(
            model, picky, loss, opt, [4, 8, 16], max_seconds=2, target_precision=0.3, **FAST
        )
    assert set(result.measurements["local_bsz"]) == {4, 16}
    assert "ValueError: no data for 8" in result.errors[8]
    row = result.summary.set_index("local_bsz").loc[8]
    assert row["stop_reason"] == "error" and "no data for 8" in row["error"]


def test_a_step_failing_at_the_smallest_size_only_is_reported_and_the_others_measured():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    _, make_batch, loss, opt = _linear_spec()

    # a BatchNorm cannot train on a batch of one sample
    with pytest.warns(ProfileWarning, match="batch size 1 not measured.*more than 1 value"):
        result = profile_model(
            model, make_batch, loss, opt, [1, 4], max_seconds=2, target_precision=0.3, **FAST
        )
    assert set(result.measurements["local_bsz"]) == {4}
    assert "more than 1 value per channel" in result.errors[1]
    assert result.facts["flops_counted_at_batch"] == 4
    assert result.facts["noise_scale_batch_sizes"] == [2, 4]  # not from the size that failed
    with pytest.raises(InputError, match="training step at batch size 1 failed.*more than 1"):
        profile_model(model, make_batch, loss, opt, [1], max_seconds=1, **FAST)


def test_a_batch_size_with_no_measured_step_has_no_peak_memory():
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    _, make_batch, loss, opt = _linear_spec()
    with pytest.warns(ProfileWarning, match="batch size 1 not measured"):
        result = profile_model(  # no warm-up: the step that fails is a timed one
            model, make_batch, loss, opt, [1, 4], max_seconds=1, **{**FAST, "warmup": 0}
        )
    peak = result.summary.set_index("local_bsz")["peak_memory_bytes"]
    assert result.summary.set_index("local_bsz")["n"][1] == 0
    assert np.isnan(peak[1])  # no step ran at batch size 1: no peak of one
    assert peak[4] > 0
    assert result.summary_records()[0]["peak_memory_bytes"] is None  # null in the facts JSON


def test_batch_sizes_too_large_for_memory_say_to_give_smaller_ones():
    model, make_batch, loss, opt = _linear_spec()
    huge = 2**47  # 2**47 x 8 floats: more than any address space, so the allocation fails
    with pytest.raises(InputError) as err:
        profile_model(model, make_batch, loss, opt, [huge], max_seconds=1, **FAST)
    said = str(err.value)
    assert f"out of memory at batch size {huge}" in said, said
    assert f"to fix: give smaller `batch_sizes` ({huge} does not fit" in said, said
    assert "make_batch" not in said.split("to fix")[1], said
    with pytest.warns(ProfileWarning, match=f"batch size {huge} not measured: out of memory"):
        result = profile_model(model, make_batch, loss, opt, [4, huge], max_seconds=1, **FAST)
    assert set(result.measurements["local_bsz"]) == {4}


def test_batch_maker_failing_everywhere_is_an_input_error_naming_each_size():
    model, _, loss, opt = _linear_spec()

    def broken(b):
        raise RuntimeError(f"disk gone at {b}")

    with pytest.raises(InputError, match="4: RuntimeError: disk gone at 4; 8: .*disk gone at 8"):
        profile_model(model, broken, loss, opt, [4, 8], max_seconds=1, **FAST)


def test_other_bad_arguments_are_input_errors():
    with pytest.raises(InputError, match="target precision"):
        profile_spec("mlp", [4], target_precision=0, **FAST)
    with pytest.raises(InputError, match="max seconds"):
        profile_spec("mlp", [4], max_seconds=0, **FAST)
    # an endless budget would time steps until noise let the target be met: maybe never
    with pytest.raises(InputError, match="max seconds inf .* finite"):
        profile_spec("mlp", [4], max_seconds=float("inf"), **FAST)
    with pytest.raises(InputError) as refused:
        profile_spec("mlp", [4], out="p.txt", **FAST)
    assert refused.value.source == "p.txt" and ".csv" in refused.value.fix
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA GPU"):
            profile_spec("mlp", [4], device="cuda", **FAST)
        # the device as the user wrote it, index and all
        with pytest.raises(InputError, match="device 'cuda:9' asked for"):
            profile_spec("mlp", [4], device="cuda:9", **FAST)
    else:
        gpus = torch.cuda.device_count()
        with pytest.raises(InputError, match=f"device 'cuda:{gpus}' asked for.*has {gpus}"):
            profile_spec("mlp", [4], device=f"cuda:{gpus}", **FAST)
    with pytest.raises(InputError, match="unknown model 'mpl'.*did you mean 'mlp'"):
        load_spec("mpl")


def test_ctrl_c_keeps_every_step_so_far_and_writes_them(tmp_path):
    model, make_batch, loss, opt = _linear_spec()
    calls = {"n": 0}

    def loss_until_interrupted(out, target):
        calls["n"] += 1
        if calls["n"] == 60:  # Ctrl-C arrives while the second batch size is timed
            raise KeyboardInterrupt
        return loss(out, target)

    out = tmp_path / "p.csv"
    result = profile_model(
        model,
        make_batch,
        loss_until_interrupted,
        opt,
        [4, 8],
        target_precision=0.001,
        max_seconds=60,
        min_steps=30,
        max_steps=30,
        out=out,
        **FAST,
    )
    assert result.interrupted
    kept = read_table(out)
    assert len(kept) == len(result.measurements) > 30  # all of batch 4 and part of batch 8
    assert set(kept["local_bsz"]) == {4, 8}
    assert result.summary.set_index("local_bsz").loc[8, "stop_reason"] == "interrupted"
    assert json.loads(facts_path(out).read_text())["interrupted"] is True


@pytest.mark.parametrize("where", ["step", "batch size"])
def test_an_interrupt_a_library_swallowed_still_stops_the_profile(tmp_path, where):
    """numpy turns an interrupt inside an import into ImportError; the caller may carry on."""
    model, make_batch, loss, opt = _linear_spec()
    calls = {"n": 0}

    def loss_with_a_swallowed_interrupt(out, target):
        calls["n"] += 1
        if calls["n"] == 40:
            try:  # what the signal handler does, inside a library's guarded import
                errors.on_interrupt(signal.SIGINT)
            except KeyboardInterrupt:
                if where == "batch size":  # surfaces as another error: one batch size fails
                    raise ImportError("numpy core failed to import") from None
        return loss(out, target)

    out = tmp_path / "p.csv"
    try:
        result = profile_model(
            model,
            make_batch,
            loss_with_a_swallowed_interrupt,
            opt,
            [4, 8, 16],
            target_precision=0.001,
            max_seconds=60,
            min_steps=30,
            max_steps=30,
            out=out,
            **FAST,
        )
    finally:
        errors.interrupted_by.clear()
    assert result.interrupted and calls["n"] < 45  # stopped at the next step, not at 90
    assert set(read_table(out)["local_bsz"]) == {4, 8}  # what was measured is kept
    assert not result.errors  # the interrupt is not reported as a failed batch size


def test_demo_models_train_and_report_facts():
    for name in DEMO_MODELS:
        spec = load_spec(name)
        batch = spec.make_batch(3)
        loss = spec.loss_fn(spec.model(batch[0]), batch[1])
        assert loss.ndim == 0 and torch.isfinite(loss)
        n = sum(p.numel() for p in spec.model.parameters())
        assert 10_000 < n < 1_000_000, name  # small enough to profile in seconds on 2 cores


def test_model_callable_may_return_a_tuple(tmp_path, monkeypatch):
    (tmp_path / "my_models.py").write_text(
        "import torch\n"
        "def build():\n"
        "    m = torch.nn.Linear(4, 2)\n"
        "    return (m, lambda b: (torch.randn(b, 4), torch.randint(0, 2, (b,))),\n"
        "            torch.nn.CrossEntropyLoss(), lambda p: torch.optim.SGD(p, lr=0.1))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec("my_models:build")
    assert spec.name == "build"
    result = profile_spec(spec, [2], max_seconds=1, target_precision=0.5, **FAST)
    assert np.all(result.measurements["model"] == "build")
    with pytest.raises(InputError, match="no callable 'biuld'.*did you mean 'build'"):
        load_spec("my_models:biuld")
    with pytest.raises(InputError, match="cannot import module"):
        load_spec("no_such_module_here:build")


def test_sample_profiles_in_data_are_valid_measurement_tables():
    from tests.builders import REPO

    data = REPO / "data"
    single = validate_measurements(read_table(data / "sample_profile_single.csv"))
    dist = validate_measurements(read_table(data / "sample_profile_dist.csv"))
    assert set(single["model"]) == set(dist["model"]) == set(DEMO_MODELS)
    assert set(dist["num_workers"]) == {1, 2, 4}
    assert (dist["sync_time_s"] >= 0).all()
    coll = read_table(data / "sample_profile_allreduce.csv")
    assert coll["bytes"].min() == 1024 and coll["bytes"].max() >= 64 * 2**20
    facts = json.loads((data / "sample_profile_facts.json").read_text())
    assert all(facts[m]["flops_per_sample"] > 0 for m in DEMO_MODELS)
    fingerprint = json.loads((data / "sample_profile_fingerprint.json").read_text())
    assert fingerprint["instance_type"] == single["instance_type"].iloc[0]
    assert sum(p.stat().st_size for p in data.glob("sample_profile_*")) < 1_000_000


def test_a_profile_warning_names_the_users_line_not_the_librarys():
    # in notebook 01 the warning read "srifty_kit/measure/profile.py:682: ProfileWarning"
    # with the library's own source line under it: it names the line that called srifty_kit
    import warnings

    from srifty_kit.measure.profile import profile_spec
    from srifty_kit.measure.zoo import ModelSpec

    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    _, make_batch, loss, opt = _linear_spec()
    spec = ModelSpec(model, make_batch, loss, opt, "bn")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        profile_spec(spec, [1, 4], max_seconds=1, **FAST)
    ours = [w for w in said if issubclass(w.category, ProfileWarning)]
    assert ours and all(w.filename == __file__ for w in ours)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"model": "mlp"}, "model must be a torch.nn.Module, got str"),  # AttributeError
        ({"level": 1.5}, "level must be a probability between 0 and 1, got 1.5"),  # used
        ({"level": "x"}, "level must be a probability"),  # every batch size lost
        ({"warmup": 1.5}, "warmup must be a whole number >= 0"),  # "check the model"
        ({"warmup": -1}, "warmup must be a whole number >= 0"),
        ({"min_steps": -5}, "min_steps must be a whole number >= 1"),
        ({"noise_repeats": 0}, "noise_repeats must be a whole number >= 1"),
        ({"noise_seconds": -1}, "noise_seconds must be a number of seconds >= 0"),
        ({"memory_budget_bytes": -1}, "memory_budget_bytes must be a whole number >= 1"),
        ({"name": 3}, "name must be a text label"),  # a model column of 3
        ({"target_precision": "2%"}, "target precision 2% is not in"),  # TypeError
        ({"batch_sizes": None}, "batch sizes must be a list of whole numbers"),  # TypeError
        # NaN and inf reached int() as ValueError and OverflowError, said as no bad input
        ({"batch_sizes": [4, float("nan")]}, "batch sizes must be whole numbers >= 1, got nan"),
        ({"batch_sizes": [float("inf")]}, "batch sizes must be whole numbers >= 1, got inf"),
        ({"batch_sizes": [4, True]}, "batch sizes must be whole numbers >= 1, got True"),
        ({"batch_sizes": [2.5]}, "batch sizes must be whole numbers >= 1, got 2.5"),
        ({"batch_sizes": [-1]}, "batch sizes must be whole numbers >= 1, got -1"),
    ],
)
def test_an_argument_that_cannot_be_is_refused_before_a_step_is_timed(change, words):
    model, make_batch, loss, opt = _linear_spec()
    args = {"model": model, "batch_sizes": [4], "max_seconds": 1, **FAST, **change}
    with pytest.raises(InputError, match=words) as err:
        profile_model(make_batch=make_batch, loss_fn=loss, optimizer_fn=opt, **args)
    assert "to fix" in str(err.value)


def test_one_batch_size_given_as_a_number_is_one_batch_size():
    # as Job(local_bsz=8): it was "TypeError: 'int' object is not iterable"
    assert check_batch_sizes(8) == [8]
    assert check_batch_sizes(np.int64(8)) == [8]


def test_a_whole_batch_size_given_as_a_float_is_that_batch_size():
    # the library's rule for a count (errors.is_whole): 8.0 is 8, as Job(local_bsz=8.0) takes
    assert check_batch_sizes([8.0, np.float64(4.0)]) == check_batch_sizes([8, 4]) == [4, 8]
    assert check_batch_sizes(np.float32(8.0)) == [8]


@pytest.mark.parametrize("given", ["8,4", "[4, 8]", " 4, 8 ,4"])
def test_batch_sizes_as_the_command_line_writes_them_are_read(given):
    # papermill -p batch_sizes 4,8 gives notebook 01 this string
    assert check_batch_sizes(given) == [4, 8]


@pytest.mark.parametrize("given, bad", [("4,eight", "'eight'"), ("4,,8", "''"), ("4,-8", "'-8'")])
def test_a_string_of_batch_sizes_names_the_piece_that_is_no_size(given, bad):
    with pytest.raises(InputError, match=f"batch sizes must be whole numbers >= 1, got {bad}"):
        check_batch_sizes(given)
