"""Fetching the EC2 catalog live from AWS with boto3 (specs, offerings, spot history, prices).

Only this module talks to AWS; ``catalog`` queries the table it returns. Hardware figures and
spot interruption buckets, which no AWS API returns, come from the embedded catalog. Every
AWS failure is one redacted line (``_aws_errors``), and nothing is written until all is
fetched.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import boto3
import numpy as np
import pandas as pd
from botocore import exceptions as bx
from botocore.config import Config

from srifty_kit.catalog.query import EXTRA_COLUMNS, load_catalog
from srifty_kit.errors import CommandFailed, InputError, did_you_mean
from srifty_kit.tables import aws_errors, redact
from srifty_kit.tables.contracts import CATALOG, validate_catalog
from srifty_kit.tables.files import write_table
from srifty_kit.tables.progress import progress_bar

log = logging.getLogger(__name__)

# The Pricing API answers from a few regions only; its us-east-1 endpoint serves every region.
PRICING_REGION = "us-east-1"
PERMISSIONS = (
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeSpotPriceHistory",
    "pricing:GetProducts",
)
_SPOT_PRODUCTS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]
_SPOT_BATCH = 50  # instance types per DescribeSpotPriceHistory request


class AwsAccessError(InputError):
    """AWS refused or could not be reached: credentials, permissions, region, endpoint."""


def pricing_filters(region: str) -> list[dict[str, str]]:
    """GetProducts filters for Linux, shared-tenancy, on-demand EC2 prices in ``region``."""
    wanted = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


# ---------------------------------------------------------------- pure parsing of AWS answers


def _network_gbps(text: str | None) -> float:
    """Advertised Gbps in a NetworkPerformance string: 'Up to 25 Gigabit' 25, '4x 100' 400."""
    m = re.search(r"(?:(\d+)\s*x\s*)?([\d.]+)\s*Gigabit", text or "")
    if not m:
        return np.nan  # qualitative ("High", "Moderate"): unknown, not guessed
    return float(m.group(1) or 1) * float(m.group(2))


def _accelerator(info: dict) -> tuple[int, str | None, float, str | None]:
    """(count, model, memory GiB of one device, kind) from GpuInfo or NeuronInfo."""
    for key, devices, kind in (
        ("GpuInfo", "Gpus", "GPU"),
        ("NeuronInfo", "NeuronDevices", "Neuron"),
    ):
        items = (info.get(key) or {}).get(devices) or []
        if items:
            mib = (items[0].get("MemoryInfo") or {}).get("SizeInMiB")
            mem = round(mib / 1024, 2) if mib else np.nan
            return sum(int(d.get("Count", 0)) for d in items), items[0].get("Name"), mem, kind
    return 0, None, np.nan, None


def _spec_rows(infos: Iterable[dict], region: str) -> pd.DataFrame:
    """One catalog row per DescribeInstanceTypes entry (specs only, no prices)."""
    rows = []
    for info in infos:
        count, model, mem, kind = _accelerator(info)
        net = info.get("NetworkInfo") or {}
        perf = net.get("NetworkPerformance")
        cards = net.get("NetworkCards") or []
        baseline = [c["BaselineBandwidthInGbps"] for c in cards if "BaselineBandwidthInGbps" in c]
        name = info["InstanceType"]
        rows.append(
            {
                "instance_type": name,
                "region": region,
                "vcpus": (info.get("VCpuInfo") or {}).get("DefaultVCpus"),
                "memory_gib": (info.get("MemoryInfo") or {}).get("SizeInMiB", np.nan) / 1024,
                "gpu_count": count,
                "gpu_model": model,
                "gpu_memory_gib": mem,
                "network_gbps": _network_gbps(perf),
                "efa_supported": bool(net.get("EfaSupported", False)),
                "family": name.split(".", 1)[0],
                "category": "accelerated" if count else "cpu",
                "accelerator_kind": kind,
                "network_is_up_to": bool(perf and perf.lower().startswith("up to")),
                "network_baseline_gbps": float(sum(baseline)) if baseline else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _spot_medians(records: Sequence[dict]) -> pd.DataFrame:
    """Per type: median over zones of each zone's latest spot price, and the zone count."""
    if not records:
        return pd.DataFrame(columns=["spot_usd_per_hr", "zones"], index=pd.Index([], name="type"))
    table = pd.DataFrame(
        {
            "type": [r["InstanceType"] for r in records],
            "zone": [r["AvailabilityZone"] for r in records],
            "price": [float(r["SpotPrice"]) for r in records],
            "time": pd.to_datetime([r["Timestamp"] for r in records], utc=True),
        }
    )
    latest = table.sort_values("time").groupby(["type", "zone"])["price"].last()
    by_type = latest.groupby(level="type")
    return pd.DataFrame({"spot_usd_per_hr": by_type.median(), "zones": by_type.size()})


def _parse_price_list(items: Iterable[str]) -> pd.Series:
    """On-demand USD/hour per instance type from GetProducts' PriceList JSON strings."""
    prices: dict[str, list[float]] = {}
    for raw in items:
        doc = json.loads(raw)
        attrs = (doc.get("product") or {}).get("attributes") or {}
        name = attrs.get("instanceType")
        # [REGION-]BoxUsage is the ordinary usage type (not HostBoxUsage, dedicated, blocks)
        if not name or not re.search(r"(^|-)BoxUsage:", attrs.get("usagetype", "")):
            continue
        if attrs.get("marketoption", "OnDemand") != "OnDemand":
            continue
        for term in ((doc.get("terms") or {}).get("OnDemand") or {}).values():
            for dim in (term.get("priceDimensions") or {}).values():
                usd = float((dim.get("pricePerUnit") or {}).get("USD", "nan"))
                if dim.get("unit") == "Hrs" and usd > 0:
                    prices.setdefault(name, []).append(usd)
    # several matching products for one type are rare; the lowest is the plain on-demand rate
    return pd.Series({k: min(v) for k, v in prices.items()}, dtype=float)


def _from_embedded(table: pd.DataFrame, embedded: pd.DataFrame, region: str) -> pd.DataFrame:
    """Add what AWS does not return: accelerator figures (by model and memory), buckets."""
    figures = [
        "gpu_fp16_tflops",
        "gpu_fp32_tflops",
        "gpu_tf32_tflops",
        "gpu_bf16_tflops",
        "gpu_sm_count",
        "gpu_mem_bw_gbps",
        "gpu_compute_capability",
        "gpu_figures_source",  # the documents behind the figures, carried with them
    ]
    acc = embedded.dropna(subset=["gpu_model"]).assign(
        _mem=lambda d: d["gpu_memory_gib"].astype(float).round(1)
    )
    # reindex: an older embedded table without some figure columns leaves them empty
    acc = acc.drop_duplicates(["gpu_model", "_mem"]).set_index(["gpu_model", "_mem"])
    acc = acc.reindex(columns=figures)
    keys = pd.MultiIndex.from_arrays(
        [table["gpu_model"].astype(object), table["gpu_memory_gib"].astype(float).round(1)]
    )
    out = table.copy()
    out[figures] = acc.reindex(keys).to_numpy()
    # Spot Advisor buckets are per region: copy them only from a catalog of the same region
    same = embedded[embedded["region"] == region].set_index("instance_type")
    out["spot_interruption_bucket"] = out["instance_type"].map(same["spot_interruption_bucket"])
    return out


# ------------------------------------------------------------------------- talking to AWS


def _pages(client, operation: str, key: str, **params) -> list[dict]:
    return [
        item for page in client.get_paginator(operation).paginate(**params) for item in page[key]
    ]


def _offered(ec2, region: str) -> set[str]:
    offers = _pages(
        ec2,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="region",
        Filters=[{"Name": "location", "Values": [region]}],
    )
    return {o["InstanceType"] for o in offers}


def _spot_records(ec2, types: Sequence[str], window_days: float) -> list[dict]:
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=window_days)
    records: list[dict] = []
    for i in range(0, len(types), _SPOT_BATCH):
        records += _pages(
            ec2,
            "describe_spot_price_history",
            "SpotPriceHistory",
            InstanceTypes=list(types[i : i + _SPOT_BATCH]),
            ProductDescriptions=_SPOT_PRODUCTS,
            StartTime=start,
        )
    return records


def _ondemand(pricing, region: str) -> pd.Series:
    items = _pages(
        pricing,
        "get_products",
        "PriceList",
        ServiceCode="AmazonEC2",
        Filters=pricing_filters(region),
        FormatVersion="aws_v1",
    )
    return _parse_price_list(items)


def _fail(problem: str, fix: str) -> AwsAccessError:
    return AwsAccessError(problem, source="AWS", fix=fix)


class AwsFailed(CommandFailed):
    """AWS (or the endpoint standing in for it) failed in a way the user cannot fix by
    changing the command: a server error, throttling past the retries, an answer botocore
    could not use. Exit 1."""


@contextlib.contextmanager
def _aws_errors(
    profile: str | None, max_attempts: int, endpoints: Sequence[str | None] = ()
) -> Iterator[None]:
    """Turn every botocore failure into one redacted line, never a traceback.

    What the user can act on (credentials, permissions, region, endpoint, a request the
    endpoint refused) is an ``AwsAccessError`` (exit 2); a server error, throttling that
    outlasted the retries (``aws_errors.throttled``) or an answer that cannot be used is an
    ``AwsFailed`` (exit 1). Lines name the AWS error code
    and operation; AWS's own message, when quoted, is redacted and shortened
    (``aws_errors.describe``), since some (SignatureDoesNotMatch, an echoing proxy) quote
    the signed request.
    """
    login = f"aws sso login --profile {profile}" if profile else "aws configure"
    renew = f"renew or set the credentials (`{login}`, or AWS_PROFILE / AWS_ACCESS_KEY_ID)"
    check = (
        "check --endpoint-url and --pricing-endpoint-url (they must serve the EC2 and Pricing "
        "APIs) and --region"
        if any(endpoints)
        else "check --region (and --families)"
    )
    try:
        yield
    except bx.ProfileNotFound:
        raise _fail(
            f"AWS profile {profile!r} not found",
            "check `aws configure list-profiles` or drop --profile",
        ) from None
    except aws_errors.MISSING_CREDENTIALS + aws_errors.EXPIRED_LOGIN as err:
        raise _fail(f"no usable AWS credentials ({type(err).__name__})", renew) from None
    except aws_errors.ENDPOINT_ERRORS as err:
        url = getattr(err, "kwargs", {}).get("endpoint_url", "")
        raise _fail(
            f"cannot reach the AWS endpoint {url} ({type(err).__name__})".replace("  ", " "),
            "check the network, the region and --endpoint-url, then retry",
        ) from None
    except bx.ClientError as err:
        code, _ = aws_errors.error_of(err.response)
        status = aws_errors.status_of(err)
        call = err.operation_name
        if code in aws_errors.CREDENTIAL_CODES:
            raise _fail(f"AWS rejected the credentials ({code}) on {call}", renew) from None
        if code in aws_errors.PERMISSION_CODES:
            raise _fail(
                f"AWS denied {call} ({code})",
                "grant the credentials " + ", ".join(PERMISSIONS),
            ) from None
        if code == "OptInRequired":
            raise _fail(
                f"the region is not enabled for this account ({code})",
                "enable it in the AWS console or choose another --region",
            ) from None
        if aws_errors.throttled(err):  # the account's call rate, not the command: exit 1
            raise AwsFailed(
                f"{aws_errors.throttled_said(err, max_attempts)}; to fix: retry in a minute, "
                "lower the rate of other AWS calls from this account (fewer at once), or allow "
                "more attempts (--max-attempts)"
            ) from None
        if 400 <= status < 500:  # refused: the region, an endpoint that is not EC2's, ...
            raise _fail(f"AWS refused the request: {aws_errors.describe(err)}", check) from None
        raise AwsFailed(
            f"AWS failed after {max_attempts} attempts: {aws_errors.describe(err)}; "
            "to fix: retry later, or allow more attempts (--max-attempts)"
        ) from None
    except aws_errors.UNPARSABLE as err:  # something answered, but not as AWS does
        raise _fail(
            f"the endpoint's answer is not an AWS API response ({aws_errors.describe_other(err)})",
            check,
        ) from None
    except bx.BotoCoreError as err:
        raise AwsFailed(
            f"the AWS call failed ({aws_errors.describe_other(err)}); to fix: retry later"
        ) from None


def _check_region(session: boto3.session.Session, region: str, endpoint_url: str | None) -> None:
    if endpoint_url:  # a private or test endpoint may serve any region name
        return
    known = session.get_available_regions("ec2")
    if known and region not in known:
        raise InputError(
            f"unknown AWS region {region!r}{did_you_mean(region, known)}",
            fix="use a region name such as us-east-1 (or update boto3 for a new region)",
        )


def fetch_catalog(
    region: str,
    profile: str | None = None,
    *,
    endpoint_url: str | None = None,
    pricing_endpoint_url: str | None = None,
    max_attempts: int = 8,
    spot_window_days: float = 3.0,
    families: Sequence[str] | None = None,
    embedded: pd.DataFrame | None = None,
    session: boto3.session.Session | None = None,
    pricing_client=None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Build the catalog of ``region`` from the AWS APIs (validated, same columns as embedded).

    Kept: the types offered in the region that carry accelerators plus those of the embedded
    catalog's families, or only ``families`` when given. ``max_attempts`` (the first included)
    bounds botocore's standard retries; ``session``/``pricing_client`` are for callers that
    already hold them (and for tests).
    """
    embedded = load_catalog() if embedded is None else embedded
    wanted = set(families) if families is not None else set(embedded["family"].dropna())
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},  # includes the first
        connect_timeout=10,
        read_timeout=60,
    )
    # botocore's debug records hold signed headers: every record is redacted when created
    redact.install_logging()
    with _aws_errors(profile, max_attempts, (endpoint_url, pricing_endpoint_url)):
        session = session or boto3.session.Session(profile_name=profile)
        # credentials from a profile or a role are masked as well as the environment's
        redact.remember_credentials(session.get_credentials())
        _check_region(session, region, endpoint_url)
        ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
        pricing = pricing_client or session.client(
            "pricing", region_name=PRICING_REGION, endpoint_url=pricing_endpoint_url, config=config
        )
        bar = progress_bar(total=4, desc=f"catalog {region}", show=progress)
        with bar as steps:
            steps.set_postfix_str("offerings")
            offered = _offered(ec2, region)
            steps.update()
            steps.set_postfix_str("instance types")
            infos = _pages(ec2, "describe_instance_types", "InstanceTypes")
            specs = _spec_rows([i for i in infos if i["InstanceType"] in offered], region)
            specs = specs[(specs["gpu_count"] > 0) | specs["family"].isin(wanted)]
            if families is not None:
                specs = specs[specs["family"].isin(wanted)]
            if specs.empty:
                raise _fail(
                    f"AWS lists none of the wanted instance types in {region}",
                    "check --region (and the families asked for)",
                )
            steps.update()
            steps.set_postfix_str("spot prices")
            types = sorted(specs["instance_type"])
            spot = _spot_medians(_spot_records(ec2, types, spot_window_days))
            steps.update()
            steps.set_postfix_str("on-demand prices")
            ondemand = _ondemand(pricing, region)
            steps.update()
    return _assemble(specs, spot, ondemand, embedded, region, spot_window_days)


def _assemble(
    specs: pd.DataFrame,
    spot: pd.DataFrame,
    ondemand: pd.Series,
    embedded: pd.DataFrame,
    region: str,
    window_days: float,
) -> pd.DataFrame:
    """Join specs, prices and embedded figures into a validated catalog table."""
    day = dt.date.today().isoformat()
    table = _from_embedded(specs.reset_index(drop=True), embedded, region)
    names = table["instance_type"]
    table["ondemand_usd_per_hr"] = names.map(ondemand)
    table["spot_usd_per_hr"] = names.map(spot["spot_usd_per_hr"])
    zones = names.map(spot["zones"])
    table["spot_price_basis"] = [
        f"AZ median of latest AWS spot prices ({int(z)} AZs, {window_days:g}-day window, {day})"
        if z == z
        else None
        for z in zones
    ]
    table["offered_in_region"] = True
    has_figures = table["gpu_fp16_tflops"].notna() | table["gpu_mem_bw_gbps"].notna()
    table["source"] = [
        f"AWS APIs {day}: DescribeInstanceTypes, DescribeSpotPriceHistory, Pricing GetProducts"
        + ("; accelerator figures: embedded catalog (vendor datasheets)" if fig else "")
        + ("; interruption: embedded catalog (Spot Advisor)" if isinstance(b, str) else "")
        for fig, b in zip(has_figures, table["spot_interruption_bucket"], strict=True)
    ]
    columns = [c.name for c in CATALOG] + list(EXTRA_COLUMNS)
    table = table[columns].sort_values("instance_type").reset_index(drop=True)
    log.info(
        "fetched %d instance types in %s (%d with on-demand, %d with spot prices)",
        len(table),
        region,
        table["ondemand_usd_per_hr"].notna().sum(),
        table["spot_usd_per_hr"].notna().sum(),
    )
    return validate_catalog(table, source=f"AWS catalog {region}")


def refresh_catalog(
    region: str, out: str | os.PathLike, profile: str | None = None, **options
) -> pd.DataFrame:
    """Fetch the catalog of ``region`` and write it to ``out`` atomically; return the table.

    Any failure leaves an existing ``out`` untouched (nothing is written until all is fetched).
    """
    table = fetch_catalog(region, profile, **options)
    write_table(table, Path(out))
    return table
