"""Whether this host is an EC2 instance, told from local files without the network.

Both callers of the instance metadata service ask this first: the profiler (which instance
type measured the steps, ``measure.host``) and the redaction of a report's credentials
(``tables.aws_errors``: whether an instance role's credentials can be resolved). Off EC2 the
service's link-local address does not answer, and on other clouds something else may.
No boto3 or botocore here: the profiler imports this on every run.
"""

from __future__ import annotations

import re

# Files in which Linux tells, without the network, that this host is an EC2 instance: the
# board asset tag holds the instance id (Nitro), the hypervisor's (Xen) or the DMI system UUID
# begins with "ec2"/"EC2" ("Detect whether a host is an EC2 instance", Amazon EC2 User Guide,
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/identify_ec2_instances.html).
# product_uuid is readable by root only; an unreadable or missing file says nothing.
EC2_HOST_FILES = (
    "/sys/devices/virtual/dmi/id/board_asset_tag",
    "/sys/hypervisor/uuid",
    "/sys/devices/virtual/dmi/id/product_uuid",
)
_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_UUID_HEAD = re.compile(r"[0-9a-f]{8}-")


def on_ec2() -> bool:
    """Whether this host is an EC2 instance, from the files ``EC2_HOST_FILES`` names (no
    network): an instance id in the board asset tag, or a system UUID that begins with
    ``ec2``, also where SMBIOS writes it little-endian (``45E12AEC-...``), as the EC2 user
    guide says. A UUID that begins so by chance gives a false yes; its only cost is one wait
    for the metadata service, bounded by the caller's timeout.

    Returns:
        True when any of the files says so; False off Linux, or when none can be read.
    """
    for path in EC2_HOST_FILES:
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                text = fh.read(80).strip().lower()
        except OSError:  # absent (not Linux, not Xen), or root's only
            continue
        if _INSTANCE_ID.fullmatch(text) or text.startswith("ec2"):
            return True
        if _UUID_HEAD.match(text):  # little-endian: the first field's bytes reversed
            head = text[:8]
            if "".join(head[i : i + 2] for i in (6, 4, 2, 0)).startswith("ec2"):
                return True
    return False
