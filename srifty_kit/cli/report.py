"""``srifty report weekly``: the weekly cost report of a usage ledger, local files or Athena."""

from __future__ import annotations

import argparse
import datetime as dt

from srifty_kit.cli.flags import (
    input_file,
    input_path,
    non_negative,
    output_folder,
    positive_int,
    probability,
)

# what deploy/ holds; tests/cli/test_report.py checks the files say the same
CRON_LINE = (
    "0 6 * * 1  cd /srv/srifty && mkdir -p reports/weekly && .venv/bin/srifty report weekly "
    "--quiet --ledger /data/cur --out reports/weekly >> reports/weekly/cron.log 2>&1"
)
SCHEDULING = f"""\
scheduling: every Monday at 06:00, for the week before (the default week)
  cron (crontab -e; deploy/srifty-weekly-report.crontab):
    {CRON_LINE}
  systemd (deploy/systemd/): copy srifty-weekly-report.service and .timer to
    /etc/systemd/system/, the .env file to /etc/srifty/weekly-report.env, then
    systemctl enable --now srifty-weekly-report.timer

A rerun for the same week replaces that week's report. AWS credentials come from the
profile (--aws-profile) or the environment as for the AWS CLI; they never enter the report.
"""


def _iso_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO date like 2026-11-23, got {text!r}"
        ) from None


def _tag(text: str) -> tuple[str, str]:
    """'team=business_unit' -> ('team', 'business_unit')."""
    name, sep, key = text.partition("=")
    if not sep or not name.strip() or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=TAG_KEY like team=business_unit, got {text!r}"
        )
    return name.strip(), key.strip()


def _tag_mapping(args: argparse.Namespace) -> dict[str, list[str]] | None:
    """--tag-file (JSON object: name -> key or list of keys), then each --tag over it."""
    from srifty_kit.errors import InputError

    mapping: dict[str, list[str]] = {}
    if args.tag_file:
        import json
        from pathlib import Path

        try:
            given = json.loads(Path(args.tag_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            reason = getattr(err, "strerror", None) or str(err).splitlines()[0]
            raise InputError(
                f"cannot be read as a JSON tag mapping ({reason})",
                source=args.tag_file,
                fix='e.g. {"team": "business_unit", "job": ["application", "app"]}',
            ) from None
        if not isinstance(given, dict) or not all(
            isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
            for v in given.values()
        ):
            raise InputError(
                "a tag mapping is a JSON object of tag names to a key or a list of keys",
                source=args.tag_file,
                fix='e.g. {"team": "business_unit", "job": ["application", "app"]}',
            )
        mapping = {k: [v] if isinstance(v, str) else v for k, v in given.items()}
    for name, key in args.tag or []:
        mapping[name] = [key]
    return mapping or None


def _weekly(args: argparse.Namespace) -> int:
    from srifty_kit.errors import InputError
    from srifty_kit.present.reports import run_weekly_report
    from srifty_kit.present.weekly import week_note

    athena = {
        "athena_database": args.athena_database,
        "athena_table": args.athena_table,
        "athena_output": args.athena_output,
        "athena_workgroup": args.athena_workgroup,
        "aws_profile": args.aws_profile,
        "aws_region": args.aws_region,
    }
    engine = "athena" if args.athena_table or args.athena_database else "duckdb"
    if engine == "duckdb" and not args.ledger:
        raise InputError(
            "no ledger given",
            fix="give --ledger FILE_OR_FOLDER, or --athena-database and "
            "--athena-table for a CUR table in Athena",
        )
    if engine == "athena" and args.ledger:
        raise InputError("give --ledger or the Athena table, not both", fix="drop one")
    note = week_note(args.week)
    report = run_weekly_report(
        args.week,
        args.ledger,
        args.out,
        engine=engine,
        top_n=args.top,
        models=args.models,
        level=args.level,
        slack=args.slack,
        progress=not args.quiet,
        tags=_tag_mapping(args),
        gpu_catalog=args.gpu_catalog,
        **athena,  # given without a table they are refused there, not ignored
    )
    if note:
        print(f"note: {note}")
    summary = report.notebook.with_suffix(".json")
    print(f"report: {report.html}\nnotebook: {report.notebook}\nsummary: {summary}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``report weekly``."""
    report = subparsers.add_parser(
        "report",
        help="papermill reports: the weekly cost report",
        description="Reports run as notebooks with papermill and exported to HTML.",
    )
    kinds = report.add_subparsers(dest="report", metavar="REPORT", parser_class=type(report))
    kinds.required = True
    weekly = kinds.add_parser(
        "weekly",
        help="a week's EC2 spend, trend, forecast and savings, from a CUR, FOCUS or jobs ledger",
        description="Run notebooks/04_weekly_cost_report for one week of a usage ledger and "
        "write weekly_cost_<WEEK>.html (no code, figures embedded), the executed notebook and "
        "weekly_cost_<WEEK>.json (the figures) to --out: the reconciliation of every row of "
        "the week by currency and charge category (billed and effective cost), the training "
        "compute part, commitments, spend by team, job, instance family and pricing, "
        "week-over-week change, next week's forecast with its interval, what the recommended "
        "configurations would have cost, and a data-quality table. The ledger is an AWS Cost "
        "and Usage Report (legacy or 2.0 names; CSV, gzip CSV or Parquet; a file or a folder of "
        "parts), a FOCUS 1.0-1.3 export or a jobs ledger, read in place by DuckDB; or a table in "
        "Athena (--athena-database/--athena-table), queried with the same SQL.",
        epilog=SCHEDULING,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    weekly.add_argument(
        "--week",
        type=_iso_date,
        help="a day of the week, ISO (e.g. 2026-11-23); another day than a Monday stands for "
        "its Monday-to-Sunday week (said in the report); default: the last full Mon-Sun week",
    )
    weekly.add_argument(
        "--ledger", type=input_path, help="the ledger: a .csv, .csv.gz or .parquet file or folder"
    )
    weekly.add_argument("--out", default="reports/weekly", type=output_folder, help="output folder")
    weekly.add_argument(
        "--top", type=positive_int, default=10, help="jobs in the top-jobs and savings tables"
    )
    weekly.add_argument(
        "--tag",
        type=_tag,
        action="append",
        metavar="NAME=KEY",
        help="read job, team, model or local_bsz from another tag key, e.g. --tag "
        "team=business_unit --tag job=application (CUR resource tags, FOCUS Tags)",
    )
    weekly.add_argument(
        "--tag-file",
        type=input_file,
        metavar="JSON",
        help='the same as a JSON file: {"team": "business_unit", "job": ["application"]}',
    )
    weekly.add_argument(
        "--gpu-catalog",
        type=input_file,
        metavar="TABLE",
        help="GPU counts of other providers' instance types (CSV/Parquet/JSON with "
        "instance_type, gpu_count); unknown types are reported as such",
    )
    weekly.add_argument(
        "--models",
        nargs="+",
        type=input_file,
        metavar="PATH",
        help="model files (srifty fit) or profiles for the savings; default: the packaged "
        "and reference measurements",
    )
    weekly.add_argument(
        "--level", type=probability, default=0.9, help="level of the intervals (default 0.9)"
    )
    weekly.add_argument(
        "--slack",
        type=non_negative,
        default=0.25,
        help="a recommended configuration may take this much longer than the job did, at the "
        "upper end of its time at --level (default 0.25: 25%%)",
    )
    weekly.add_argument("--quiet", action="store_true", help="no progress bar")
    aws = weekly.add_argument_group("Athena (the CUR in S3)")
    aws.add_argument("--athena-database", help="Athena database holding the CUR table")
    aws.add_argument("--athena-table", help="the CUR (or FOCUS) table")
    aws.add_argument("--athena-output", help="s3:// location for Athena's query results")
    aws.add_argument("--athena-workgroup", help="Athena workgroup (default: primary)")
    aws.add_argument("--aws-profile", help="AWS CLI profile to use")
    aws.add_argument("--aws-region", help="AWS region of the Athena table")
    weekly.set_defaults(func=_weekly, prog=weekly.prog)
