"""Which machine a measurement ran on: EC2 type (IMDSv2) or a stable local label, fingerprint."""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import re
import socket
import urllib.error
import urllib.request
from typing import Any

from srifty_kit.tables.ec2_host import on_ec2

# Instance metadata service, version 2 (session token first, then the query), as documented in
# the EC2 user guide "Use the Instance Metadata Service to access instance metadata".
_IMDS = "http://169.254.169.254/latest"
_IMDS_TIMEOUT_S = 0.2  # a slow answer on EC2 is not worth a longer wait: a local label stands

# Beyond two processes per core the timings measure the scheduler, not the model.
_WORKERS_PER_CORE = 2


def _imds_instance_type(timeout: float = _IMDS_TIMEOUT_S, base: str = _IMDS) -> str | None:
    """The EC2 instance type from IMDSv2, or None when this is not an EC2 instance."""
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # IMDS is never proxied
    try:
        token_req = urllib.request.Request(
            f"{base}/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
        )
        with opener.open(token_req, timeout=timeout) as resp:
            token = resp.read().decode()
        query = urllib.request.Request(
            f"{base}/meta-data/instance-type",
            headers={"X-aws-ec2-metadata-token": token},
        )
        with opener.open(query, timeout=timeout) as resp:
            value = resp.read().decode().strip()
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return value or None


def cpu_model() -> str:
    """The CPU's marketing name (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_cores() -> int:
    """Logical cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _slug(text: str) -> str:
    text = re.sub(r"\((r|tm)\)|cpu|processor|\d+-core", " ", text.lower())
    text = re.sub(r"@.*$", "", text)  # drop the clock speed
    return "-".join(re.findall(r"[a-z0-9]+", text))[:40].strip("-") or "unknown"


def _cuda_names() -> list[str]:
    import torch  # only the profiler's machinery calls this; torch is already loaded there

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def local_label(device: str = "cpu") -> str:
    """A stable label for a machine outside EC2, e.g. ``local-cpu-amd-epyc-2c``."""
    if device.startswith("cuda"):
        names = _cuda_names()
        if names:
            return f"local-gpu-{_slug(names[0])}-{len(names)}g"
    return f"local-cpu-{_slug(cpu_model())}-{cpu_cores()}c"


@functools.lru_cache(maxsize=4)
def instance_type(device: str = "cpu") -> str:
    """``$SRIFTY_INSTANCE_TYPE`` when set, else the EC2 instance type (IMDSv2) on an EC2
    instance (``tables.ec2_host.on_ec2``: elsewhere the service is not asked, so no profile
    waits on an address that does not answer, and another cloud's metadata service, at the
    same address, is never read as EC2's), else a local label."""
    override = os.environ.get("SRIFTY_INSTANCE_TYPE", "").strip()
    if override:
        return override
    return (on_ec2() and _imds_instance_type()) or local_label(device)


def hostname() -> str:
    """This machine's host name."""
    return socket.gethostname()


def max_world_size(device: str = "cpu") -> int:
    """How many data-parallel workers this machine runs at once: GPUs, or 2 per CPU core."""
    if device.startswith("cuda"):
        return len(_cuda_names())
    return _WORKERS_PER_CORE * cpu_cores()


def now() -> str:
    """The current time, UTC, ISO 8601 (what the ``timestamp`` column holds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class CpuWatch:
    """CPU time that other processes took while we measured: contention we cannot subtract.

    Torch's intra-op threads spin while they wait, so on a loaded machine a CPU step can take
    many times longer than on a quiet one, and the fitted constants inherit that. The load
    average cannot tell: it counts our own threads too.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float]:
        import time

        import psutil

        t = psutil.cpu_times()
        busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        own = psutil.Process().cpu_times()
        mine = own.user + own.system + own.children_user + own.children_system
        return time.monotonic(), busy, mine

    def others_cores(self) -> float:
        """Cores' worth of CPU other processes used since the watch started."""
        t1, busy1, mine1 = self._read()
        t0, busy0, mine0 = self._start
        return max(0.0, ((busy1 - busy0) - (mine1 - mine0)) / max(t1 - t0, 1e-9))

    def busy_message(self, threshold_cores: float = 0.5) -> str | None:
        """A warning when other processes took more than ``threshold_cores``, else None."""
        others = self.others_cores()
        if others <= threshold_cores:
            return None
        return (
            f"other processes kept {others:.1f} of {cpu_cores()} cores busy while this "
            "profile measured: CPU step times include their work; profile on a quiet "
            "machine, or pin torch threads (torch.set_num_threads) to the idle cores"
        )


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """Hardware and software facts that make a profile reproducible (and comparable)."""
    import psutil
    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "instance_type": instance_type(device),
        "host": hostname(),
        "date": now(),
        "cpu_model": cpu_model(),
        "logical_cores": cpu_cores(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 2),
        "gpus": _cuda_names(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "os": platform.platform(),
        # other processes on the machine shift step times: the 1/5/15-minute load averages
        "loadavg_1_5_15": [round(x, 2) for x in load],
    }
