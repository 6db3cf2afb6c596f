"""Ctrl-C and SIGTERM end every long command promptly, keep what was measured, lose nothing older.

Each case starts the real console script, with SIGINT inherited as ignored (a background job
of a non-interactive shell) or as default, signals it at a stated moment, and checks the exit
status, the time it took to stop, and the files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import read_table
from tests.builders import REPO, SRIFTY

pytestmark = pytest.mark.slow

BUDGET_S = 60  # what the command was given: an interrupt must end it far sooner
STOP_WITHIN_S = 15
OLD = "model,instance_type,num_nodes,num_workers,local_bsz,step_time_s,gpus_per_node\n"
OLD += "old,x,1,1,4,0.5,1\n"


class Run:
    """A ``srifty`` process and everything it printed on stderr, read by one thread."""

    def __init__(
        self, args: list[str], cwd: Path, ignore_sigint: bool, stdout=None, env=None
    ) -> None:
        def inherit() -> None:
            if ignore_sigint:  # what a background job of a non-interactive shell inherits
                signal.signal(signal.SIGINT, signal.SIG_IGN)

        self.proc = subprocess.Popen(
            [SRIFTY, *args],
            cwd=cwd,
            stdout=subprocess.DEVNULL if stdout is None else stdout,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=inherit,
            env=env,
        )
        self.seen: list[str] = []
        self.reader = threading.Thread(
            target=lambda: self.seen.extend(iter(lambda: self.proc.stderr.read(1), ""))
        )
        self.reader.start()

    @property
    def stderr(self) -> str:
        return "".join(self.seen)

    def wait_for(self, predicate, timeout: float = BUDGET_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ended before the moment came:\n{self.stderr[-2000:]}")
            time.sleep(0.05)

    def stop(self, signum: int) -> float:
        """Send ``signum``; seconds until the process ended."""
        sent = time.monotonic()
        self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout=STOP_WITHIN_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(10)
        return time.monotonic() - sent


def _profile_args(out: str) -> list[str]:
    return [
        "profile",
        "--model",
        "mlp",
        "--batch-sizes",
        "4,8",
        "--max-seconds",
        str(BUDGET_S),
        "--target-precision",
        "0.00001",
        "--out",
        out,
    ]


def _handling_signals(pid: int) -> bool:
    """Whether srifty has set up its signal handling (SIGTERM caught), as the first thing its
    command module does: from then on an interrupt is its to handle; before it, Python's own
    start-up is still running."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def _loading_numpy(pid: int) -> bool:
    """Whether numpy's core library is mapped into the process: srifty's own imports (pandas,
    numpy) are under way, long before main() starts."""
    return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()


MOMENTS = {
    # while srifty imports its modules (pandas, then the subcommand's: torch)
    "import": lambda run, out: run.wait_for(lambda: _handling_signals(run.proc.pid)),
    # the bar's first line is out: warming up or timing the first batch size, nothing saved yet
    "set-up": lambda run, out: run.wait_for(lambda: "profiling" in run.stderr),
    # steps of the first batch size are being timed: the line that starts counting them (on a
    # pipe the bar writes one as a batch size's timing begins, not only every 30 s)
    "timing": lambda run, out: run.wait_for(lambda: "n=" in run.stderr),
}


@pytest.mark.parametrize("ignore_sigint", [True, False], ids=["sigint-ignored", "sigint-default"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_profile_stops_promptly_and_keeps_measured_steps(tmp_path, moment, signum, ignore_sigint):
    out = tmp_path / "p.csv"
    out.write_text(OLD)
    partial = tmp_path / "p.partial.csv"
    run = Run(_profile_args("p.csv"), tmp_path, ignore_sigint)
    MOMENTS[moment](run, out)
    took = run.stop(signum)
    assert took < STOP_WITHIN_S
    assert run.proc.returncode == 128 + signum, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert out.read_text() == OLD  # the older file is never replaced by an unfinished run
    if not partial.exists():  # stopped before a step was measured: nothing written
        assert moment != "timing"
        assert not (tmp_path / "p.facts.json").exists()
        assert not (tmp_path / "p.partial.facts.json").exists()
        last = run.stderr.strip().splitlines()[-1]
        said = "interrupted before any step was measured: nothing written; p.csv is as it was"
        assert last == said, run.stderr[-2000:]  # from main's start on, whatever the moment
    else:  # what was measured is kept beside it, as a valid table, and the last line says so
        kept = validate_measurements(read_table(partial))
        assert len(kept) >= 1 and (kept["model"] == "mlp").all()
        assert (tmp_path / "p.partial.facts.json").is_file()
        last = run.stderr.strip().splitlines()[-1]
        assert "in p.partial.csv; p.csv is as it was" in last, run.stderr[-2000:]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".p.")]


@pytest.mark.parametrize("ignore_sigint", [True, False], ids=["sigint-ignored", "sigint-default"])
def test_an_interrupt_while_the_command_loads_ends_it_with_one_line(tmp_path, ignore_sigint):
    run = Run(_profile_args("p.csv"), tmp_path, ignore_sigint)
    run.wait_for(lambda: _loading_numpy(run.proc.pid))  # pandas loading; main() not started
    run.stop(signal.SIGINT)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    said = "interrupted before any step was measured: nothing written"
    assert run.stderr.strip().splitlines() == [said], run.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


SLOW_BUILD = """
import pathlib
import time


def build():  # a model that takes long to build: the command is still starting
    pathlib.Path("building").touch()
    time.sleep(BUDGET_S)
""".replace("BUDGET_S", str(BUDGET_S))


@pytest.mark.parametrize("older", [True, False], ids=["older-file", "no-file"])
@pytest.mark.parametrize("command", ["profile", "profile-dist"])
def test_an_interrupt_while_starting_says_nothing_was_written(tmp_path, command, older):
    (tmp_path / "slow_build.py").write_text(SLOW_BUILD)
    out = tmp_path / "p.csv"
    if older:
        out.write_text(OLD)
    args = [command, "--model", "slow_build:build", "--batch-sizes", "4", "--out", "p.csv"]
    run = Run(args, tmp_path, ignore_sigint=False)
    run.wait_for(lambda: (tmp_path / "building").exists())  # torch imported, model building
    run.stop(signal.SIGINT)
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    kept = "; p.csv is as it was" if older else ""
    said = f"interrupted before any step was measured: nothing written{kept}"
    assert run.stderr.strip().splitlines()[-1] == said, run.stderr[-2000:]
    left = {p.name for p in tmp_path.iterdir()} - {"__pycache__"}
    assert left == {"slow_build.py", "building", *(["p.csv"] if older else [])}
    assert not older or out.read_text() == OLD


SLOW_MOVE = """
import pathlib
import time

from srifty_kit.measure.zoo import mlp


def build():  # a model that takes long to move to its device, as a large one to a GPU
    spec = mlp()

    class SlowToMove(type(spec.model)):
        def to(self, *args, **kwargs):
            pathlib.Path("moving").touch()
            time.sleep(BUDGET_S)
            return super().to(*args, **kwargs)

    spec.model.__class__ = SlowToMove
    return spec
""".replace("BUDGET_S", str(BUDGET_S))


@pytest.mark.parametrize("older", [True, False], ids=["older-file", "no-file"])
def test_an_interrupt_while_the_model_moves_to_its_device_says_so(tmp_path, older):
    (tmp_path / "slow_move.py").write_text(SLOW_MOVE)
    out = tmp_path / "p.csv"
    if older:
        out.write_text(OLD)
    args = ["profile", "--model", "slow_move:build", "--batch-sizes", "4", "--out", "p.csv"]
    run = Run([*args, "--device", "cpu"], tmp_path, ignore_sigint=False)
    run.wait_for(lambda: (tmp_path / "moving").exists())
    run.stop(signal.SIGINT)
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    kept = "; p.csv is as it was" if older else ""
    said = "interrupted while moving the model to cpu, before any step was measured: "
    said += f"nothing written{kept}"
    assert run.stderr.strip().splitlines() == [said], run.stderr[-2000:]
    left = {p.name for p in tmp_path.iterdir()} - {"__pycache__"}
    assert left == {"slow_move.py", "moving", *(["p.csv"] if older else [])}
    assert not older or out.read_text() == OLD


def test_an_interrupted_profile_says_its_largest_batch_was_not_searched(tmp_path):
    with open(tmp_path / "said.txt", "w") as said:
        run = Run(_profile_args("p.csv"), tmp_path, ignore_sigint=False, stdout=said)
        MOMENTS["timing"](run, tmp_path / "p.csv")
        run.stop(signal.SIGINT)
    assert run.proc.returncode == 130, run.stderr[-2000:]
    summary = (tmp_path / "said.txt").read_text()
    assert "steps written to" in summary  # the summary of what was measured
    assert "largest batch not searched (interrupted" in summary
    assert "None" not in summary


SLOW_BATCHES = """
import time

import torch
from torch import nn

from srifty_kit.measure.zoo import ModelSpec


def build():
    torch.manual_seed(0)

    def make_batch(b):
        time.sleep(0.1)  # the noise scale makes two batches a repeat: it lasts its 2 s
        return torch.randn(b, 8), torch.randint(0, 2, (b,))

    sgd = lambda p: torch.optim.SGD(p, lr=0.1)  # noqa: E731
    return ModelSpec(nn.Linear(8, 2), make_batch, nn.CrossEntropyLoss(), sgd, "slow")
"""


def test_a_profile_interrupted_after_its_timing_says_every_batch_size_completed(tmp_path):
    (tmp_path / "slow_batches.py").write_text(SLOW_BATCHES)
    args = _profile_args("p.csv")
    args[2], args[6] = "slow_batches:build", "3"  # --model, --max-seconds
    with open(tmp_path / "said.txt", "w") as said:
        run = Run(args, tmp_path, ignore_sigint=False, stdout=said)
        run.wait_for(lambda: "2/2" in run.stderr)  # both sizes timed (a line): noise scale runs
        run.stop(signal.SIGINT)
    assert run.proc.returncode == 130, run.stderr[-2000:]
    summary = (tmp_path / "said.txt").read_text()
    assert summary.count("time budget") == 2, summary  # both batch sizes ran their share
    assert "largest batch not searched (interrupted" in summary
    assert "before every batch size completed" not in summary, summary


def _soon(run: Run) -> None:
    """The second SIGINT comes soon after the first, as GNU timeout sends it again to the
    process group."""
    time.sleep(0.02)


def _signal_until_ended(run: Run) -> None:
    """SIGINT every 10 ms until the process has ended: one lands in every step of its
    finishing (saving, the summary, the last line, the interpreter's exit)."""
    deadline = time.monotonic() + STOP_WITHIN_S
    while run.proc.poll() is None and time.monotonic() < deadline:
        run.proc.send_signal(signal.SIGINT)
        time.sleep(0.01)


@pytest.mark.parametrize("more", [_soon, _signal_until_ended], ids=["twice", "many"])
def test_signals_while_a_profile_finishes_on_one_change_nothing(tmp_path, more):
    out = tmp_path / "p.csv"
    out.write_text(OLD)
    run = Run(_profile_args("p.csv"), tmp_path, ignore_sigint=False)
    MOMENTS["timing"](run, out)
    run.proc.send_signal(signal.SIGINT)
    more(run)
    run.stop(signal.SIGINT)  # the second (or last) signal
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("interrupted: the "), run.stderr[-2000:]
    assert last.endswith("in p.partial.csv; p.csv is as it was"), last
    assert len(validate_measurements(read_table(tmp_path / "p.partial.csv"))) >= 1
    assert out.read_text() == OLD


def test_profile_without_an_older_file_keeps_its_steps_in_the_output(tmp_path):
    out = tmp_path / "p.csv"
    run = Run(_profile_args("p.csv"), tmp_path, ignore_sigint=True)
    MOMENTS["timing"](run, out)
    run.stop(signal.SIGTERM)
    assert run.proc.returncode == 128 + signal.SIGTERM, run.stderr[-2000:]
    kept = validate_measurements(read_table(out))
    assert len(kept) >= 1 and not (tmp_path / "p.partial.csv").exists()
    assert "are in p.csv" in run.stderr.strip().splitlines()[-1]


def _interrupted_profile(folder: Path) -> str:
    """``srifty profile --out p.csv`` stopped by SIGINT while it times its first batch size:
    the last line it printed."""
    run = Run(_profile_args("p.csv"), folder, ignore_sigint=False)
    MOMENTS["timing"](run, folder / "p.csv")
    run.stop(signal.SIGINT)
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    return run.stderr.strip().splitlines()[-1]


def test_a_second_interrupted_profile_keeps_the_first_ones_partial_rows(tmp_path):
    out = tmp_path / "p.csv"
    out.write_text(OLD)
    first, second = tmp_path / "p.partial.csv", tmp_path / "p.partial.2.csv"
    _interrupted_profile(tmp_path)
    kept = first.read_bytes()
    facts = (tmp_path / "p.partial.facts.json").read_bytes()
    assert len(validate_measurements(read_table(first))) >= 1

    last = _interrupted_profile(tmp_path)  # the same --out again
    assert out.read_text() == OLD
    assert first.read_bytes() == kept  # the first run's rows, as they were
    assert (tmp_path / "p.partial.facts.json").read_bytes() == facts
    assert len(validate_measurements(read_table(second))) >= 1
    assert (tmp_path / "p.partial.2.facts.json").is_file()
    assert "in p.partial.2.csv; p.csv is as it was" in last, last
    assert "an earlier unfinished run's rows stay in p.partial.csv" in last, last

    # a run that finishes replaces p.csv and drops only its own partial files
    done = _finished_profile(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text() != OLD and first.read_bytes() == kept and second.is_file()
    assert not (tmp_path / "p.partial.3.csv").exists()
    assert "runs' rows stay in p.partial.csv, p.partial.2.csv" in done.stderr, done.stderr


def _finished_profile(folder: Path) -> subprocess.CompletedProcess:
    """``srifty profile --out p.csv`` run to its end (a short one)."""
    return subprocess.run(
        [SRIFTY, "profile", "--model", "mlp", "--batch-sizes", "4", "--max-seconds", "2",
         "--target-precision", "0.5", "--quiet", "--out", "p.csv"],
        cwd=folder, capture_output=True, text=True, timeout=BUDGET_S,
    )  # fmt: skip


def test_a_finished_profile_keeps_the_rows_an_interrupted_one_left_in_its_output(tmp_path):
    out, facts = tmp_path / "p.csv", tmp_path / "p.facts.json"
    assert "are in p.csv" in _interrupted_profile(tmp_path)  # nothing was there: rows in p.csv
    rows, said = out.read_bytes(), facts.read_bytes()

    done = _finished_profile(tmp_path)  # the same command again, to its end
    assert done.returncode == 0, done.stderr[-2000:]
    assert validate_measurements(read_table(out))["run"].nunique() == 1  # its own run only
    assert (tmp_path / "p.partial.csv").read_bytes() == rows  # the interrupted run's, kept
    assert (tmp_path / "p.partial.facts.json").read_bytes() == said
    assert not (tmp_path / "p.partial.2.csv").exists()  # where it worked: dropped
    last = done.stderr.strip().splitlines()[-1]
    assert last == "the unfinished run's rows that p.csv held are now in p.partial.csv", last

    again = _finished_profile(tmp_path)  # a finished run's p.csv is replaced, as before
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "p.partial.csv").read_bytes() == rows
    assert not (tmp_path / "p.partial.2.csv").exists()
    last = again.stderr.strip().splitlines()[-1]
    assert last == "an earlier unfinished run's rows stay in p.partial.csv", last


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_profile_dist_stops_in_the_distributed_phase_and_keeps_its_rows(tmp_path, signum):
    out = tmp_path / "d.csv"
    out.write_text(OLD)
    partial = tmp_path / "d.partial.csv"
    args = _profile_args("d.csv")
    args[0] = "profile-dist"
    args[4] = "8"  # one batch size
    run = Run([*args, "--world-sizes", "1,2"], tmp_path, ignore_sigint=True)
    run.wait_for(partial.is_file)  # world size 1 written beside d.csv; world size 2 runs
    took = run.stop(signum)
    assert took < STOP_WITHIN_S
    assert run.proc.returncode == 128 + signum, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert out.read_text() == OLD
    kept = validate_measurements(read_table(partial))
    assert len(kept) >= 1 and set(kept["num_workers"]) <= {1, 2}
    assert "in d.partial.csv; d.csv is as it was" in run.stderr.strip().splitlines()[-1]


def _finished_profile_dist(folder: Path) -> subprocess.CompletedProcess:
    """``srifty profile-dist --out d.csv`` run to its end (world size 1, a short one)."""
    return subprocess.run(
        [SRIFTY, "profile-dist", "--model", "mlp", "--batch-sizes", "8", "--world-sizes", "1",
         "--max-seconds", "2", "--target-precision", "0.5", "--quiet", "--out", "d.csv"],
        cwd=folder, capture_output=True, text=True, timeout=BUDGET_S,
    )  # fmt: skip


def test_a_finished_profile_dist_keeps_the_rows_an_interrupted_one_left_in_its_output(tmp_path):
    out, facts = tmp_path / "d.csv", tmp_path / "d.facts.json"
    args = _profile_args("d.csv")
    args[0] = "profile-dist"
    args[4] = "8"  # one batch size
    run = Run([*args, "--world-sizes", "1,2"], tmp_path, ignore_sigint=True)
    run.wait_for(out.is_file)  # nothing was there: world size 1 written to d.csv itself
    run.stop(signal.SIGINT)
    assert run.proc.returncode == 130, run.stderr[-2000:]
    assert "are in d.csv" in run.stderr.strip().splitlines()[-1], run.stderr[-2000:]
    rows, said = out.read_bytes(), facts.read_bytes()
    assert '"finished": false' in said.decode()  # the facts mark the run unfinished

    done = _finished_profile_dist(tmp_path)  # a later run with the same --out, to its end
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "d.partial.csv").read_bytes() == rows  # the interrupted run's, kept
    assert (tmp_path / "d.partial.facts.json").read_bytes() == said
    assert not (tmp_path / "d.partial.2.csv").exists()  # where it worked: dropped
    assert '"finished": true' in facts.read_text()
    assert set(validate_measurements(read_table(out))["num_workers"]) == {1}  # its own rows
    last = done.stderr.strip().splitlines()[-1]
    assert last == "the unfinished run's rows that d.csv held are now in d.partial.csv", last


# Loaded by Python's own start-up (``site``) of the srifty process below, from PYTHONPATH: it
# says when that start-up is over (the kit's code is next), and can send the process SIGINT
# at a stated point of its loading: while the module holding the command's ``main`` is
# compiled and loaded, or pandas.
STARTUP_HOOK = """
import os
import signal
import sys
from importlib.machinery import SourceFileLoader

WHEN = os.environ.get("SRIFTY_TEST_SIGINT_WHILE_LOADING")
loaded = SourceFileLoader.get_code


def get_code(self, fullname):
    path = self.get_filename(fullname)
    if WHEN == "main" and "srifty_kit" in path:
        with open(path) as source:
            now = "\\ndef main(" in source.read()
    else:
        now = WHEN == fullname
    if now:
        os.kill(os.getpid(), signal.SIGINT)
    return loaded(self, fullname)


if WHEN:
    SourceFileLoader.get_code = get_code
sys.stderr.write("python started\\n")
"""


def _with_startup_hook(tmp_path: Path, **env: str) -> dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(STARTUP_HOOK)
    paths = [str(hook), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **env}


def _fit_over_an_older_model(tmp_path: Path) -> tuple[list[str], Path, str]:
    older = tmp_path / "model.json"
    older.write_text('{"an": "older model"}\n')
    data = REPO / "data" / "sample_profile_dist.csv"
    return ["fit", "--measurements", str(data), "--out", str(older)], older, older.read_text()


def _said(run: Run) -> list[str]:
    return [line for line in run.stderr.strip().splitlines() if line != "python started"]


@pytest.mark.parametrize("when", ["main", "pandas"], ids=["main-compiling", "pandas-loading"])
def test_an_interrupt_while_the_command_itself_loads_is_one_line_and_130(tmp_path, when):
    # before: the handling sat at the top of the command's own ~300-line module, which
    # Python compiles whole before its first line runs: SIGINT then was a traceback
    args, older, was = _fit_over_an_older_model(tmp_path)
    env = _with_startup_hook(tmp_path, SRIFTY_TEST_SIGINT_WHILE_LOADING=when)
    run = Run(args, tmp_path, ignore_sigint=False, env=env)
    run.proc.wait(timeout=BUDGET_S)
    run.reader.join(10)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
    assert _said(run) == ["srifty fit: interrupted"], run.stderr[-2000:]
    assert older.read_text() == was


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.2, 0.5])
@pytest.mark.parametrize("command", ["search --help", "fit"])
def test_ctrl_c_early_in_start_up_never_shows_a_traceback(tmp_path, command, after_s):
    # the moments count from the end of Python's own start-up (site), which no code of the
    # kit's can reach: an interrupt inside it is Python's ("Fatal Python error: init_import_site")
    args, older, was = _fit_over_an_older_model(tmp_path)
    args = command.split() if command != "fit" else args
    run = Run(args, tmp_path, ignore_sigint=False, env=_with_startup_hook(tmp_path))
    run.wait_for(lambda: "python started" in run.stderr)
    time.sleep(after_s)
    run.stop(signal.SIGINT)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    if run.proc.returncode == 0:  # it had finished: a whole new model, or the help
        assert command != "fit" or json.loads(older.read_text())["version"]
    else:
        assert run.proc.returncode == 128 + signal.SIGINT, run.stderr[-2000:]
        assert older.read_text() == was
        assert _said(run)[-1].endswith(": interrupted"), run.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hook", "model.json"]
