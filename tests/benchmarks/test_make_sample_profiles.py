"""The script that makes the packaged sample profiles: an interrupt leaves the samples alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.builders import REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_sample_run_writes_nothing_over_the_samples_there(tmp_path, signum, code):
    # Ctrl-C ends the profile that is running, which returns what it measured; the script
    # went on to the next model and, minutes later, wrote that half profile over the samples
    older = {f"sample_profile_{k}.csv": f"older {k}\n".encode() for k in ("single", "dist")}
    for name, text in older.items():
        (tmp_path / name).write_bytes(text)
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "make_sample_profiles.py"), "--out", tmp_path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: proc.stderr.read(1), "")))
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while "profiling mlp" not in "".join(seen) and time.monotonic() < deadline:
            assert proc.poll() is None, "".join(seen)[-2000:]
            time.sleep(0.05)
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == code
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    said = "".join(seen).strip().splitlines()[-1]
    assert said == f"interrupted: nothing written, the samples in {tmp_path} are as they were"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == older
