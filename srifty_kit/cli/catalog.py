"""``srifty catalog show|refresh``: list the EC2 catalog, or rebuild it from AWS."""

from __future__ import annotations

import argparse
import json
import sys

from srifty_kit.catalog.query import filter_catalog, load_catalog
from srifty_kit.cli.flags import (
    input_file,
    name_list,
    non_negative,
    output,
    positive,
    positive_int,
    region,
    url,
)
from srifty_kit.errors import counted
from srifty_kit.tables.files import json_records

# what fits a terminal; csv and json carry every column
_TABLE_COLUMNS = [
    "instance_type",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "efa_supported",
    "ondemand_usd_per_hr",
    "spot_usd_per_hr",
    "spot_interruption_bucket",
]


def _show(args: argparse.Namespace) -> int:
    # no --region: us-east-1 for the embedded catalog, every row of a --catalog file
    table = load_catalog(region=args.region, path=args.catalog)
    table = filter_catalog(
        table,
        gpu=args.gpu,
        family=args.family,
        min_gpu_mem_gib=args.min_gpu_mem,
    )
    if args.format == "csv":
        table.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        # every float as the table holds it, as the csv writes it (to_json keeps 10 decimals)
        print(json.dumps(json_records(table), indent=1, allow_nan=False))
    elif table.empty:
        print("no instance type matches", file=sys.stderr)
    else:
        shown = table[[c for c in _TABLE_COLUMNS if c in table.columns]]
        print(shown.to_string(index=False, na_rep=""))  # to_string prints every row
    return 0


def _refresh(args: argparse.Namespace) -> int:
    from srifty_kit.catalog.aws import refresh_catalog  # boto3 is imported only when refreshing

    table = refresh_catalog(
        args.region,
        args.out,
        profile=args.profile,
        endpoint_url=args.endpoint_url,
        pricing_endpoint_url=args.pricing_endpoint_url,
        max_attempts=args.max_attempts,
        spot_window_days=args.spot_window_days,
        families=args.families,
    )
    print(
        f"wrote {counted(len(table), 'instance type')} of {args.region} to {args.out} "
        f"({table['ondemand_usd_per_hr'].notna().sum()} with on-demand, "
        f"{table['spot_usd_per_hr'].notna().sum()} with spot prices)"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``srifty catalog show`` and ``srifty catalog refresh``."""
    parser = subparsers.add_parser(
        "catalog",
        help="the EC2 catalog: specs, prices, accelerator figures",
        description="List the EC2 catalog (embedded or a file), or rebuild it from AWS.",
    )
    sub = parser.add_subparsers(dest="catalog_command", metavar="ACTION")
    sub.required = True

    show = sub.add_parser(
        "show",
        help="list instance types, filtered",
        description="List instance types with specs and prices. Filters take comma lists.",
    )
    show.add_argument(
        "--gpu", type=name_list, metavar="MODEL", help="GPU model(s), e.g. A100 or T4,L4"
    )
    show.add_argument(
        "--family", type=name_list, metavar="F", help="instance family(ies), e.g. g5 or p4d,p5"
    )
    show.add_argument(
        "--min-gpu-mem",
        type=non_negative,
        metavar="GIB",
        help="at least this memory per accelerator",
    )
    show.add_argument(
        "--catalog", type=input_file, metavar="PATH", help="a catalog file instead of the embedded"
    )
    show.add_argument(
        "--region",
        type=region,
        metavar="R",
        help="region (default us-east-1; with --catalog, every region in the file)",
    )
    show.add_argument("--format", choices=["table", "csv", "json"], default="table")
    # the catalog's `path` (in load_catalog's "to fix") is --catalog here
    show.set_defaults(func=_show, prog=show.prog, api_flags={"path": "catalog"})

    refresh = sub.add_parser(
        "refresh",
        help="rebuild the catalog from the AWS APIs",
        description="Fetch specs, offerings, spot history and on-demand prices with boto3 and "
        "write the catalog atomically: on any failure an existing file is left as it was. "
        "Any AWS error is one line naming the AWS error code, credentials masked: exit 2 when "
        "the request was refused (credentials, region, endpoint), 1 when AWS failed or kept "
        "throttling the calls past the retries (retry later). "
        "Needs ec2:DescribeInstanceTypes, ec2:DescribeInstanceTypeOfferings, "
        "ec2:DescribeSpotPriceHistory and pricing:GetProducts.",
    )
    refresh.add_argument("--region", required=True, type=region, metavar="R", help="e.g. us-east-1")
    refresh.add_argument(
        "--out", required=True, type=output(), metavar="PATH", help=".csv, .parquet or .json"
    )
    refresh.add_argument("--profile", metavar="P", help="AWS profile (default: the usual chain)")
    refresh.add_argument(
        "--families", type=name_list, metavar="F", help="only these families (comma list)"
    )
    refresh.add_argument(
        "--max-attempts",
        type=positive_int,
        default=8,
        metavar="N",
        help="attempts per call (default 8)",
    )
    refresh.add_argument(
        "--spot-window-days", type=positive, default=3.0, metavar="D", help="spot history window"
    )
    refresh.add_argument(
        "--endpoint-url", type=url, metavar="URL", help="EC2 endpoint (private or test)"
    )
    refresh.add_argument(
        "--pricing-endpoint-url", type=url, metavar="URL", help="Pricing API endpoint"
    )
    refresh.set_defaults(func=_refresh, prog=refresh.prog)
