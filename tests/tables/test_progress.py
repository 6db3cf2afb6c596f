"""Progress on stderr: a bar redrawn in place on a terminal, a few whole lines in a log."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from srifty_kit.tables.progress import progress_bar
from tests.builders import SRIFTY

# the quickest real profile that shows a bar: two batch sizes, a few seconds
PROFILE = ["profile", "--model", "mlp", "--batch-sizes", "4,8", "--max-seconds", "2",
           "--out", "p.csv"]  # fmt: skip


def _profile_with(folder, **environment: str) -> subprocess.CompletedProcess:
    """The quick profile run in ``folder`` with these environment variables added, its
    stderr a pipe (not a terminal) kept as text."""
    return subprocess.run(
        [SRIFTY, *PROFILE],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **environment},
    )


def _stages(bar, sizes=(4, 8, 16), updates=50) -> None:
    """What the profiler does: per batch size, many postfix updates, then the next size."""
    for b in bar:
        for n in range(updates):
            bar.set_postfix(bsz=b, n=n)


def _logged(capsys) -> str:
    """What the bar wrote to stderr: pytest's capture, a stream that is not a terminal."""
    assert not sys.stderr.isatty()
    return capsys.readouterr().err


def test_a_log_gets_a_line_as_each_stage_begins_and_ends_and_no_redraws(capsys):
    with progress_bar((4, 8, 16), desc="profiling x") as bar:
        _stages(bar)
    text = _logged(capsys)
    assert "\r" not in text
    lines = text.splitlines()
    assert all(line.startswith("profiling x: ") for line in lines), text
    # the bar's first line, then each batch size's first update and its end: 150 updates
    assert len(lines) == 1 + 2 * 3, text
    assert "bsz=16" in lines[-2] and "3/3" in lines[-1], text


def test_a_log_gets_a_line_at_most_once_the_users_tqdm_mininterval(capsys, monkeypatch):
    monkeypatch.setenv("TQDM_MININTERVAL", "0")  # every update is past the interval
    with progress_bar((4, 8, 16), desc="profiling x") as bar:
        _stages(bar, updates=5)
    text = _logged(capsys)
    lines = text.splitlines()
    assert len(lines) == 1 + 3 * 5 + 3 + 1, text  # first, every update, each end, the close
    assert "\r" not in text


def test_a_log_weighs_a_postfix_set_without_refresh(capsys):
    # profile-dist sets its world size with refresh=False: the log still says it began
    with progress_bar((1, 2), desc="distributed") as bar:
        for world in bar:
            bar.set_postfix(world=world, steps=3, refresh=False)
    lines = _logged(capsys).splitlines()
    assert len(lines) == 1 + 2 * 2, lines  # the first line; each world's start and end
    assert "world=2" in lines[3] and "1/2" in lines[3], lines


@pytest.mark.parametrize("show", [False, None], ids=["quiet", "terminal-only"])
def test_a_log_gets_nothing_when_the_bar_is_not_to_be_shown_there(capsys, show):
    with progress_bar((4, 8), desc="catalog", show=show) as bar:
        _stages(bar, updates=3)
    assert _logged(capsys) == ""


def _read_terminal(fd: int, proc: subprocess.Popen, timeout: float = 240) -> bytes:
    """Everything written to a pseudo-terminal until the command ends."""
    seen, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the command ended and its side of the terminal closed
            break
        if not chunk:
            break
        seen += chunk
    return bytes(seen)


@pytest.mark.slow
def test_profile_logged_to_a_file_writes_a_few_whole_lines(tmp_path):
    with open(tmp_path / "log", "wb") as log:
        done = subprocess.run(
            [SRIFTY, *PROFILE], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, timeout=240
        )
    said = (tmp_path / "log").read_bytes()
    assert done.returncode == 0, said.decode()[-2000:]
    assert b"\r" not in said, said[-2000:]
    bar = [line for line in said.decode().splitlines() if line.startswith("profiling mlp")]
    # the first line, then a line as each batch size begins and one as it ends
    assert 3 <= len(bar) <= 1 + 2 * 2, bar
    assert "0/2" in bar[0] and "2/2" in bar[-1], bar


@pytest.mark.slow
def test_profile_says_no_progress_where_the_user_set_tqdm_disable(tmp_path):
    done = _profile_with(tmp_path, TQDM_DISABLE="1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profiling mlp" not in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "p.csv").is_file()


@pytest.mark.slow
def test_profile_on_a_terminal_still_redraws_its_bar_in_place(tmp_path):
    main, side = pty.openpty()
    # a terminal's size, as a window gives it (tqdm draws nothing on a 0-column one)
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen(
            [SRIFTY, *PROFILE], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=side
        )
        os.close(side)
        seen = _read_terminal(main, proc)
        assert proc.wait(timeout=60) == 0, seen.decode(errors="replace")[-2000:]
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    # each frame returns to the line's start and draws over the last one
    assert seen.count(b"\rprofiling mlp") >= 2, seen[-2000:]


@pytest.mark.slow
def test_a_report_run_into_a_log_leaves_no_frames_of_papermills_bar(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(f"x = {i}") for i in range(6)])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, tmp_path / "r.ipynb")
    run = (
        "from srifty_kit.present.reports import run_report; "
        f"run_report({str(tmp_path / 'r.ipynb')!r}, {{}}, {str(tmp_path / 'out')!r}, html=False)"
    )
    done = subprocess.run(
        [sys.executable, "-c", run], capture_output=True, text=True, timeout=240
    )  # stderr a pipe, as under cron
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "r.ipynb").is_file()
    assert "\r" not in done.stderr and "Executing" not in done.stderr, done.stderr[-2000:]


def test_a_tqdm_variable_tqdm_cannot_read_is_bad_input_in_one_line(tmp_path):
    done = _profile_with(tmp_path, TQDM_MININTERVAL="abc")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "TQDM_MININTERVAL='abc'" in lines[0] and "to fix" in lines[0]
    assert not (tmp_path / "p.csv").exists()
