"""The profile's model facts: gradient noise scale, largest batch, machine label, IMDSv2."""

from __future__ import annotations

import http.server
import math
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srifty_kit.measure import host, memory, noise_scale


@given(
    g2=st.floats(1e-3, 1e3),
    trace=st.floats(1e-3, 1e5),
    b_small=st.integers(1, 64),
    factor=st.integers(2, 64),
)
def test_simple_estimator_inverts_the_expected_gradient_norms(g2, trace, b_small, factor):
    # E|G_B|^2 = |G|^2 + tr(Sigma)/B (McCandlish et al. 2018, Appendix A.1)
    b_big = b_small * factor
    b_simple, g2_hat, trace_hat = noise_scale.simple_noise_scale(
        g2 + trace / b_small, g2 + trace / b_big, b_small, b_big
    )
    assert g2_hat == pytest.approx(g2, rel=1e-6, abs=1e-6 * trace)
    assert trace_hat == pytest.approx(trace, rel=1e-6)
    if g2 > 1e-6 * trace:
        assert b_simple == pytest.approx(trace / g2, rel=1e-3)


@pytest.mark.parametrize("micro", [None, 3])
def test_noise_scale_of_a_model_with_known_gradient_noise(micro):
    # loss = mean_i (w - x_i)^2 / 2 with x ~ N(1, 2^2) at w = 0: per-sample gradient w - x_i,
    # so G = -1, tr(Sigma) = 4 and B_simple = 4 exactly
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    gen = torch.Generator().manual_seed(1)

    def make_batch(b):
        return torch.ones(b, 1), 1 + 2 * torch.randn(b, 1, generator=gen)

    def loss_fn(out, x):
        return ((out - x) ** 2).mean() / 2

    # micro=3: the batch of 16 is accumulated from micro-batches of 3, 3, 3, 3, 3 and 1
    est = noise_scale.measure(
        model,
        make_batch,
        loss_fn,
        (2, 16),
        torch.device("cpu"),
        max_repeats=400,
        max_seconds=30,
        level=0.95,
        target_precision=0.05,
        max_micro_batch=micro,
    )
    assert est.repeats >= 5
    assert est.noise_scale_lo <= 4 <= est.noise_scale_hi
    assert est.noise_scale == pytest.approx(4, rel=0.35)
    assert est.noise_scale_std > 0
    assert model.weight.grad is None  # measuring leaves no gradient behind


def test_noise_scale_is_undefined_when_noise_swamps_the_gradient():
    rng = np.random.default_rng(0)
    sq_small = rng.normal(1.0, 0.01, 20)  # |G_B|^2 no larger at the small batch: |G|^2 <= 0
    sq_big = rng.normal(1.5, 0.01, 20)
    est = noise_scale.estimate(sq_small, sq_big, 2, 8)
    assert est.noise_scale is None
    assert "not positive" in est.note
    assert est.to_dict()["noise_scale"] is None


def test_an_undefined_noise_scale_has_no_spread():
    rng = np.random.default_rng(0)
    # the means say tr(Sigma) <= 0, though some resamples of the repeats say otherwise
    est = noise_scale.estimate(rng.normal(1.0, 0.3, 20), rng.normal(1.05, 0.3, 20), 2, 8)
    assert est.noise_scale is None and "not positive" in est.note
    assert est.noise_scale_std is None
    assert est.noise_scale_lo is None and est.noise_scale_hi is None


@given(threshold=st.integers(0, 100_000), known_ok=st.integers(1, 5000))
@settings(max_examples=200)
def test_bisection_finds_the_largest_batch_that_fits(threshold, known_ok):
    tried = []

    def fits(b):
        tried.append(b)
        return b <= threshold

    found = memory.bisect_max_batch(fits, known_ok, budget_bytes=1, limit=2**20)
    assert found.max_batch_size == threshold
    assert found.method == "bisection on CUDA out-of-memory"
    assert found.trials == len(tried) <= 2 * math.log2(2**20) + 2


def test_extrapolation_solves_the_linear_memory_fit():
    base, per_sample, budget = 500e6, 2e6, 4 * 2**30
    sizes = [4, 8, 16, 32]
    found = memory.extrapolate_max_batch(sizes, [base + per_sample * b for b in sizes], budget)
    assert found.max_batch_size == math.floor((budget - base) / per_sample)
    assert found.bytes_per_sample == pytest.approx(per_sample)
    flat = memory.extrapolate_max_batch(sizes, [base] * 4, budget)
    assert flat.max_batch_size is None and "did not grow" in flat.note
    one = memory.extrapolate_max_batch([8], [base], budget)
    assert one.max_batch_size is None and "two batch sizes" in one.note


def test_cpu_peak_memory_sees_a_large_allocation():
    # in a fresh process: in this one, memory freed by earlier tests stays resident and a new
    # allocation can reuse it without raising the peak
    script = (
        "import torch\n"
        "from srifty_kit.measure import memory\n"
        "peak = memory.PeakMemory(torch.device('cpu'))\n"
        "peak.reset()\n"
        "before = peak.peak_bytes()\n"
        "x = torch.ones(64 * 2**20 // 4)\n"  # 64 MiB, touched
        "x.add_(1)\n"
        "print(peak.peak_bytes() - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) >= 48 * 2**20


def test_local_label_is_stable_and_names_cpu_and_cores():
    label = host.local_label("cpu")
    assert label == host.local_label("cpu")
    assert label.startswith("local-cpu-") and label.endswith(f"-{host.cpu_cores()}c")
    assert " " not in label


def test_instance_type_override_and_off_ec2(monkeypatch):
    host.instance_type.cache_clear()
    monkeypatch.setenv("SRIFTY_INSTANCE_TYPE", "g5.xlarge")
    assert host.instance_type("cpu") == "g5.xlarge"
    host.instance_type.cache_clear()
    monkeypatch.delenv("SRIFTY_INSTANCE_TYPE")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert host.instance_type("cpu") == host.local_label("cpu")
    host.instance_type.cache_clear()


class _FakeImds(http.server.BaseHTTPRequestHandler):
    """IMDSv2's protocol: PUT for a token, then GET with the token header (else 401)."""

    def do_PUT(self):  # noqa: N802
        ok = self.path == "/latest/api/token" and self.headers.get(
            "X-aws-ec2-metadata-token-ttl-seconds"
        )
        self._reply(200 if ok else 400, b"tok-123")

    def do_GET(self):  # noqa: N802
        if self.headers.get("X-aws-ec2-metadata-token") != "tok-123":
            self._reply(401, b"")
        elif self.path == "/latest/meta-data/instance-type":
            self._reply(200, b"p4d.24xlarge")
        else:
            self._reply(404, b"")

    def _reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_imdsv2_token_then_instance_type_against_a_local_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _FakeImds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/latest"
        assert host._imds_instance_type(timeout=2, base=base) == "p4d.24xlarge"
    finally:
        server.shutdown()
    # nothing listening: no instance type, and no exception
    assert host._imds_instance_type(timeout=0.2, base=base) is None


def test_fingerprint_has_what_makes_a_profile_comparable():
    fp = host.fingerprint("cpu")
    for key in (
        "instance_type",
        "cpu_model",
        "logical_cores",
        "memory_gib",
        "torch",
        "date",
        "loadavg_1_5_15",
        "torch_threads",
    ):
        assert key in fp
    assert fp["torch"] == torch.__version__


def test_other_processes_busy_during_the_profile_are_said_and_recorded():
    import subprocess
    import sys

    from srifty_kit.measure.profile import ProfileWarning, profile_spec

    # real contention: two other processes spinning on the 2 cores while the profile measures
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        with pytest.warns(ProfileWarning, match="other processes kept"):
            result = profile_spec("mlp", [4, 8], max_seconds=2, progress=False)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert result.facts["other_processes_cores"] > 0.5
    assert "quiet machine" in result.facts["busy_note"]
