"""``srifty report weekly`` as a user runs it: the report from the sample CUR, from Athena (a
moto server on 127.0.0.1), bad input in one line with exit code 2, and the schedule it shows."""

from __future__ import annotations

import configparser
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

from srifty_kit.cli import build_parser
from srifty_kit.cli.report import CRON_LINE
from srifty_kit.tables.ledger import weekly_usage
from tests.builders import (
    AWS_SECRETS,
    LEDGER_WEEK,
    REPO,
    SRIFTY,
    athena_result,
    fake_aws_env,
    jobs_ledger_frame,
    moto_api,
    moto_server,
    recording_ledger,
    run_srifty,
    usage_hours,
    write_cur,
)

SAMPLE = REPO / "data" / "sample_cur_usage.parquet"
DEPLOY = REPO / "deploy"


def one_line_error(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("srifty report"), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow
def test_the_weekly_report_of_the_sample_cur_is_html_without_code_and_the_notebook(tmp_path):
    out = tmp_path / "weekly"
    # a Tuesday: the report covers its Monday-to-Sunday week and says so (issue 19, item 11)
    done = run_srifty(
        "report", "weekly", "--week", "2026-11-24", "--ledger", str(SAMPLE), "--out", str(out),
        "--quiet", timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    html = out / "weekly_cost_2026-11-23.html"
    assert f"report: {html}" in done.stdout
    assert "note: 2026-11-24 is a Tuesday: the report covers its Monday-to-Sunday week" in (
        done.stdout
    )
    assert (out / "weekly_cost_2026-11-23.ipynb").is_file()
    page = html.read_text()
    code = re.findall(r'class="jp-Cell jp-CodeCell[^"]*"', page)
    assert code and all("jp-mod-noInput" in c for c in code)
    assert page.count("data:image/png;base64") >= 3  # figures embedded
    assert re.search(
        r"Next week: \$[\d,.]+</strong> expected \(instance usage, effective cost, USD\), "
        r"90% prediction interval \$",
        page,
    )
    assert re.search(r"could have been saved on \d+ jobs \(90% sure of at least \$[\d,.]+", page)
    assert "saving_lo_usd" in page and "Traceback" not in page
    assert "2026-11-24 is a Tuesday" in page
    assert sorted(p.name for p in out.iterdir()) == [
        html.name,
        "weekly_cost_2026-11-23.ipynb",
        "weekly_cost_2026-11-23.json",
    ]
    summary = json.loads((out / "weekly_cost_2026-11-23.json").read_text())
    assert summary["week_start"] == "2026-11-23" and summary["reconciliation"]


def write_jobs(tmp_path, **change):
    path = tmp_path / "jobs.csv"
    jobs_ledger_frame(usage_hours()).assign(**change).to_csv(path, index=False)
    return path


def test_bad_input_is_one_line_and_exit_code_2_before_any_kernel(tmp_path):
    frame = jobs_ledger_frame(usage_hours()).drop(columns="cost_usd")
    frame.to_csv(tmp_path / "no_cost.csv", index=False)
    out = str(tmp_path / "out")
    cases = [
        (["--ledger", str(tmp_path / "no_cost.csv")], ("no column 'cost_usd'", "no_cost.csv")),
        (["--ledger", str(tmp_path / "absent")], ("no such file or folder",)),
        (["--ledger", str(SAMPLE), "--week", "23/11/2026"], ("ISO date",)),
        (["--ledger", str(SAMPLE), "--level", "90"], ("--level",)),
        ([], ("no ledger given",)),
        (["--ledger", str(SAMPLE), "--athena-table", "cur"], ("not both",)),
        (["--athena-table", "cur", "--athena-output", "s3://b/"], ("database and a table",)),
    ]
    for args, needles in cases:
        one_line_error(run_srifty("report", "weekly", "--out", out, *args), *needles)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_athena_options_without_an_athena_table_are_refused_not_ignored(tmp_path):
    out = tmp_path / "out"
    done = run_srifty(
        "report", "weekly", "--ledger", str(SAMPLE), "--athena-output", "s3://b/", "--out", str(out)
    )
    one_line_error(done, "Athena options given with the duckdb engine")
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "needle"),
    [({"cost_usd": -4.0}, "negative cost"), ({"start": "13/45/2026"}, "unparseable start date")],
)
def test_a_ledger_with_no_usable_row_exits_2_and_keeps_the_notebook(tmp_path, change, needle):
    out = tmp_path / "out"
    done = run_srifty(
        "report", "weekly", "--week", LEDGER_WEEK, "--ledger", str(write_jobs(tmp_path, **change)),
        "--out", str(out), "--quiet", timeout=600,
    )  # fmt: skip
    one_line_error(done, needle, "jobs.csv")
    assert (out / f"weekly_cost_{LEDGER_WEEK}.failed.ipynb").is_file()


@pytest.mark.slow
def test_a_week_without_usage_is_a_no_usage_report_not_an_error(tmp_path):
    out = tmp_path / "out"
    done = run_srifty(
        "report", "weekly", "--week", "2026-06-01", "--ledger", str(write_jobs(tmp_path)),
        "--out", str(out), "--quiet", timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No usage in the week of" in (out / "weekly_cost_2026-06-01.html").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("when", ["as it starts", "while a cell runs"])
def test_a_kernel_killed_mid_report_is_one_line_and_exit_1(tmp_path, when):
    """The kernel killed (the OOM killer, an operator): one line, exit 1, the executed
    notebook kept, last week's report as it was."""
    import psutil

    out = tmp_path / "weekly"
    out.mkdir()
    (out / "weekly_cost_2026-11-23.html").write_bytes(b"the last good report\n")
    run = subprocess.Popen(
        [SRIFTY, "report", "weekly", "--week", "2026-11-23", "--ledger", str(SAMPLE),
         "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = False
    while run.poll() is None and not killed:
        kernels = [
            child
            for child in psutil.Process(run.pid).children(recursive=True)
            if "ipykernel" in " ".join(child.cmdline())
        ]
        running = out / ".weekly_cost_2026-11-23.running.ipynb"
        # papermill marks a cell "running" in the notebook it saves when the cell starts
        if kernels and (
            when == "as it starts" or (running.exists() and '"running"' in running.read_text())
        ):
            kernels[0].kill()
            killed = True
        time.sleep(0.05)
    stdout, stderr = run.communicate(timeout=300)
    assert killed, stderr
    assert run.returncode == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("srifty report weekly: error: the notebook's kernel died")
    if when == "while a cell runs":
        assert "weekly_cost_2026-11-23.failed.ipynb" in lines[0]
        assert (out / "weekly_cost_2026-11-23.failed.ipynb").exists()
    assert (out / "weekly_cost_2026-11-23.html").read_bytes() == b"the last good report\n"


def test_help_shows_the_schedule_the_deploy_files_hold():
    done = run_srifty("report", "weekly", "--help")
    assert done.returncode == 0
    assert CRON_LINE in " ".join(done.stdout.split("\n"))  # argparse keeps the epilog's lines
    for name in ("srifty-weekly-report.crontab", "srifty-weekly-report.timer"):
        assert name in done.stdout
    crontab = DEPLOY / "srifty-weekly-report.crontab"
    (line,) = [x for x in crontab.read_text().splitlines() if x and not x.startswith("#")]
    assert line == CRON_LINE
    minute, hour, _, _, weekday, *command = line.split()
    assert (minute, hour, weekday) == ("0", "6", "1")  # Mondays at 06:00
    *steps, last = " ".join(command).split("&&")
    # the log's folder exists before the shell opens the log for the command's output
    assert [shlex.split(step) for step in steps[1:]] == [["mkdir", "-p", "reports/weekly"]]
    assert last.split(">>")[1].split()[0] == "reports/weekly/cron.log"
    argv = shlex.split(last.split(">>")[0])
    assert argv[0].endswith("srifty")
    assert build_parser().parse_args(argv[1:]).report == "weekly"


def test_the_systemd_timer_runs_the_report_every_monday():
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.read(DEPLOY / "systemd" / "srifty-weekly-report.service")
    timer = configparser.ConfigParser(interpolation=None)
    timer.read(DEPLOY / "systemd" / "srifty-weekly-report.timer")
    env = dict(
        line.split("=", 1)
        for line in (DEPLOY / "systemd" / "srifty-weekly-report.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    command = unit["Service"]["ExecStart"]
    for name, value in env.items():
        command = command.replace(f"${{{name}}}", value)
    argv = shlex.split(command)
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.report, args.week) == ("report", "weekly", None)  # the week before
    assert unit["Service"]["Type"] == "oneshot"
    assert timer["Timer"]["OnCalendar"].startswith("Mon ")
    assert timer["Install"]["WantedBy"] == "timers.target"
    if shutil.which("systemd-analyze"):
        said = subprocess.run(
            ["systemd-analyze", "calendar", "--iterations=2", timer["Timer"]["OnCalendar"]],
            capture_output=True,
            text=True,
        )
        assert said.returncode == 0, said.stderr
        days = re.findall(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d\d-\d\d 06:00:00", said.stdout)
        assert days and set(days) == {"Mon"}


@pytest.mark.slow
def test_the_report_runs_on_athena_through_the_same_flags_without_leaking_keys(tmp_path):
    cur = write_cur(usage_hours(), tmp_path / "cur.parquet")
    ledger = recording_ledger(cur)
    weekly_usage(ledger, dt.date.fromisoformat(LEDGER_WEEK))  # what Athena will be asked
    with moto_server() as endpoint:
        moto_api(
            endpoint,
            "/moto-api/static/athena/query-results",
            {"results": [athena_result(f) for f in (ledger.information_schema(), *ledger.answers)]},
        )
        out = tmp_path / "out"
        done = run_srifty(
            "report", "weekly", "--week", LEDGER_WEEK, "--out", str(out), "--quiet",
            "--athena-database", "billing", "--athena-table", "cur",
            "--athena-output", "s3://reports-bucket/athena/", "--aws-region", "us-east-1",
            "--models", str(REPO / "data" / "sample_profile_dist.csv"),
            env=fake_aws_env(endpoint, tmp_path), timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    html = (out / f"weekly_cost_{LEDGER_WEEK}.html").read_text()
    assert "athena:billing.cur" in html and "cur2" in html
    for text in (
        html,
        (out / f"weekly_cost_{LEDGER_WEEK}.ipynb").read_text(),
        done.stdout,
        done.stderr,
    ):
        assert not any(secret in text for secret in AWS_SECRETS)


# --------------------------------------------------------------------------- issue 19's cases


def snapshot(folder) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


def refused_before_any_kernel(tmp_path, *args: str, needle: str) -> None:
    """Exit 2, one line naming what to fix, no traceback, the output folder's files as
    they were (a file there beforehand is byte-identical)."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "weekly_cost_2026-11-23.html").write_bytes(b"last week's report\n")
    before = snapshot(out)
    done = run_srifty("report", "weekly", "--out", str(out), *args, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert snapshot(out) == before


def test_a_truncated_model_file_is_refused_before_the_kernel_runs(tmp_path):
    model = tmp_path / "model.json"
    model.write_text('{"version": 3, "params": {"res')  # cut off mid-write
    refused_before_any_kernel(
        tmp_path, "--ledger", str(SAMPLE), "--models", str(model), needle="not a JSON model file"
    )


def test_a_ledger_that_is_a_symlink_loop_is_one_line(tmp_path):
    loop = tmp_path / "loop.csv"
    os.symlink(loop.name, loop)
    refused_before_any_kernel(tmp_path, "--ledger", str(loop), needle="symbolic link")


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs a /sys that takes no files")
def test_an_output_folder_that_takes_no_files_is_refused_before_any_work(tmp_path):
    done = run_srifty(
        "report", "weekly", "--ledger", str(SAMPLE), "--out", "/sys/kernel/srifty-weekly"
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "/sys/kernel" in lines[0] and "Traceback" not in done.stderr


def test_a_bad_tag_mapping_is_one_line(tmp_path):
    refused_before_any_kernel(
        tmp_path, "--ledger", str(SAMPLE), "--tag", "division=business_unit", needle="unknown tag"
    )
    bad = tmp_path / "tags.json"
    bad.write_text("[1, 2]")
    refused_before_any_kernel(
        tmp_path, "--ledger", str(SAMPLE), "--tag-file", str(bad), needle="tag mapping"
    )


@pytest.mark.slow
def test_infinite_and_huge_costs_give_a_readable_report(tmp_path):
    frame = jobs_ledger_frame(usage_hours())
    frame["cost_usd"] = frame["cost_usd"].astype(object)
    frame.loc[0, "cost_usd"] = "inf"
    frame.loc[1, "cost_usd"] = "1e308"
    frame.loc[2, "cost_usd"] = "NULL"
    path = tmp_path / "jobs.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "out"
    done = run_srifty(
        "report", "weekly", "--week", LEDGER_WEEK, "--ledger", str(path), "--out", str(out),
        "--quiet", timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    page = (out / f"weekly_cost_{LEDGER_WEEK}.html").read_text()
    text = re.sub(r"<style.*?</style>|data:image/png;base64,[^\"]+", "", page, flags=re.S)
    assert "inf%" not in text and "n/a of" not in text and "RuntimeWarning" not in text
    for raw in (">None<", ">nan<", ">NaN<"):  # (the examples show "inf" as the file has it)
        assert raw not in text, raw
    amounts = re.findall(r"\$[\d,.]+", text)
    assert amounts and max(len(a) for a in amounts) < 25  # no 413-character dollar amounts
    assert "cost cell is not a finite number" in text and "missing or unparseable cost" in text
    summary = json.loads((out / f"weekly_cost_{LEDGER_WEEK}.json").read_text())
    assert all(r["billed_cost"] is not None for r in summary["reconciliation"])


def test_a_second_run_of_the_same_week_is_refused_while_the_first_writes(tmp_path):
    """A scheduled run and one by hand, at once, into one folder: the second must not start
    (it would save over the first's notebook), and must say so in one line with exit 1."""
    import fcntl

    out = tmp_path / "weekly"
    out.mkdir()
    last_week = out / "weekly_cost_2026-11-23.html"
    last_week.write_text("last good report")
    # the first run, as srifty holds it: an exclusive flock on the report's lock file
    with open(out / ".weekly_cost_2026-11-23.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        done = run_srifty(
            "report", "weekly", "--week", "2026-11-23", "--ledger", str(SAMPLE), "--out",
            str(out), "--quiet", timeout=600,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "another run of weekly_cost_2026-11-23 is writing in" in lines[0]
    assert "(process 4242)" in lines[0] and "did not start" in lines[0]
    assert last_week.read_text() == "last good report"
    assert sorted(p.name for p in out.iterdir()) == [
        ".weekly_cost_2026-11-23.lock",
        "weekly_cost_2026-11-23.html",
    ]
