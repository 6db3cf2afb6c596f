"""Statistical efficiency from the noise scale: the invariants time-to-accuracy relies on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from srifty_kit.errors import InputError
from srifty_kit.model.efficiency import (
    Work,
    cost_to_accuracy,
    efficiency,
    goodput,
    time_to_accuracy,
)

batches = st.floats(1, 1e6)
scales = st.floats(1, 1e6)


@given(b=batches, noise=scales)
def test_efficiency_against_small_batch_limit_lies_in_zero_one(b, noise):
    eff = float(efficiency(b, noise))
    assert 0 < eff <= 1


@given(b1=batches, b2=batches, noise=scales, ref=batches)
def test_larger_batch_needs_fewer_steps_but_more_samples(b1, b2, noise, ref):
    work = Work(samples=1e7, reference_bsz=ref, noise_scale=noise)
    lo, hi = sorted((b1, b2))
    assert work.steps_at(hi) <= work.steps_at(lo) * (1 + 1e-12)
    assert work.samples_at(hi) >= work.samples_at(lo) * (1 - 1e-12)


@given(ref=batches, noise=scales, samples=st.floats(1e3, 1e12))
def test_work_at_the_reference_batch_is_what_the_user_gave(ref, noise, samples):
    work = Work(samples=samples, reference_bsz=ref, noise_scale=noise)
    assert work.samples_at(ref) == pytest.approx(samples)
    assert work.steps_at(ref) == pytest.approx(samples / ref)


@given(b=batches, ref=batches, noise=scales)
def test_pollux_efficiency_is_the_sample_ratio_of_mccandlish(b, ref, noise):
    work = Work(samples=1e8, reference_bsz=ref, noise_scale=noise)
    pollux = float(efficiency(b, noise, reference_bsz=ref))
    assert pollux == pytest.approx(float(work.samples_at(ref) / work.samples_at(b)))


@given(b=batches, noise=scales, step=st.floats(1e-3, 10))
def test_time_to_accuracy_is_min_samples_over_goodput(b, noise, step):
    work = Work(samples=5e7, reference_bsz=256, noise_scale=noise)
    throughput = b / step
    hours = float(time_to_accuracy(step, b, work))
    via_goodput = work.min_samples / float(goodput(throughput, efficiency(b, noise))) / 3600
    assert hours == pytest.approx(via_goodput, rel=1e-9)


def test_without_noise_scale_work_does_not_depend_on_batch():
    work = Work(samples=1e6)
    assert np.allclose(work.samples_at([32, 1024, 65536]), 1e6)
    assert np.all(efficiency([32, 1024], None) == 1.0)


def test_steps_and_epochs_convert_to_samples():
    assert Work.from_steps(1000, reference_bsz=256).samples == 256_000
    assert Work.from_epochs(3, dataset_size=50_000).samples == 150_000


def test_cost_to_accuracy_is_hours_times_price():
    work = Work.from_steps(3600, reference_bsz=64)
    assert float(cost_to_accuracy(1.0, 64, work, 12.0)) == pytest.approx(12.0)


def test_noise_scale_without_reference_batch_is_refused_with_the_fix():
    with pytest.raises(InputError, match="reference_bsz"):
        Work(samples=1e6, noise_scale=500)


@pytest.mark.parametrize("bad", [0, -5, float("nan")])
def test_non_positive_work_is_refused(bad):
    with pytest.raises(InputError, match="positive"):
        Work(samples=bad)
