"""Parameterised notebook reports: run a notebook with papermill, export it to HTML.

``run_report`` runs any shipped notebook (or a path); ``run_weekly_report`` checks the weekly
cost report's parameters before a kernel starts and runs ``04_weekly_cost_report`` for one
week, its files named by that week.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from srifty_kit.errors import CommandFailed, InputError, did_you_mean
from srifty_kit.tables.files import as_path, atomic_write
from srifty_kit.tables.redact import redact, scrub


@dataclass(frozen=True)
class Report:
    """Where a report run left its executed notebook and its HTML export."""

    notebook: Path
    html: Path | None


def packaged_notebooks() -> dict[str, Path]:
    """The notebooks that ship with srifty_kit, by name without the .ipynb suffix."""
    root = resources.files("srifty_kit.notebooks")
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in root.iterdir()
        if entry.name.endswith(".ipynb")
    }


def find_notebook(name_or_path: str | os.PathLike) -> Path:
    """A notebook by path, or by name among the packaged ones ('03_search_ec2')."""
    path = Path(name_or_path)
    if path.suffix == ".ipynb" and path.is_file():
        return path
    shipped = packaged_notebooks()
    if path.stem in shipped:
        return shipped[path.stem]
    raise InputError(
        f"no notebook {str(name_or_path)!r}{did_you_mean(path.stem, shipped)}",
        fix="give a path to an .ipynb file or one of " + ", ".join(sorted(shipped)),
    )


def _html_of(notebook: Path, exclude_input: bool) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=exclude_input)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    return redact(body)  # the notebook is scrubbed already; the page is checked once more


# papermill writes the executed notebook through this prefix: see _ScrubbedFiles
_SCRUBBED = "srifty-scrubbed://"


class _ScrubbedFiles:
    """papermill I/O for ``srifty-scrubbed://<path>``: every save of the executed notebook
    (papermill saves it cell by cell, and once more when a cell raised) is redacted before it
    reaches the disk, so neither the report nor a kept ``.failed.ipynb`` (nor the notebook
    of a run that was killed) ever holds a credential a cell's output or traceback showed."""

    @staticmethod
    def write(buf: str, path: str) -> None:
        """Redact every string of the notebook JSON ``buf`` and write it to the path."""
        import nbformat

        local = path[len(_SCRUBBED) :]
        nb = scrub(nbformat.reads(buf, as_version=4))
        papermill_meta = nb.get("metadata", {}).get("papermill", {})
        if str(papermill_meta.get("output_path", "")).startswith(_SCRUBBED):
            papermill_meta["output_path"] = local
        Path(local).write_text(nbformat.writes(nb), encoding="utf-8")

    @staticmethod
    def read(path: str) -> str:
        """The notebook at the path, as written."""
        return Path(path[len(_SCRUBBED) :]).read_text(encoding="utf-8")

    @staticmethod
    def pretty_path(path: str) -> str:
        """The local path, for papermill's messages."""
        return path[len(_SCRUBBED) :]

    @staticmethod
    def listdir(path: str) -> list[str]:
        """Not needed by a run; papermill's interface asks for it."""
        raise NotImplementedError("srifty-scrubbed:// paths are written, not listed")


_registered: list[bool] = []


def _scrubbed(path: Path) -> str:
    """``path`` as papermill's output path through ``_ScrubbedFiles`` (registered once)."""
    if not _registered:
        from papermill.iorw import papermill_io

        papermill_io.register(_SCRUBBED, _ScrubbedFiles)
        _registered.append(True)
    return _SCRUBBED + str(path)


def run_report(
    notebook: str | os.PathLike,
    parameters: dict[str, Any],
    out_dir: str | os.PathLike,
    *,
    name: str | None = None,
    html: bool = True,
    exclude_input: bool = False,
    kernel_name: str = "python3",
    progress: bool = True,
    timeout_s: float | None = 600,
    failed_name: str | None = None,
) -> Report:
    """Execute ``notebook`` with ``parameters`` in ``out_dir`` and export it to HTML.

    The notebook executes into a temporary file beside its final name and is renamed over it
    when done, so a reader never sees half a report and a rerun replaces it whole. A run that
    fails (a cell raises, the kernel dies, the timeout or Ctrl-C) keeps what it executed for
    inspection (papermill saves the notebook cell by cell) under ``failed_name`` (default
    ``NAME.failed``), never over the last good report, which stays in place; a later good run
    removes it. An ``InputError`` raised inside the notebook comes back as one; a cell that
    raised as ``ReportFailed``, a kernel that died or a cell that ran past ``timeout_s`` as
    ``ReportStopped`` (each one line; the command exits 1). Two runs of one report into one
    folder (a scheduled run and a rerun by hand) would write the same files: the second is
    refused (``ReportBusy``) while the first runs. Every save is redacted, with those of this
    process and, for a report given an ``aws_profile`` parameter (one that calls AWS), the
    AWS credentials its kernel will resolve for that profile (None: the environment's),
    learned first. A report without it (the search report, the lessons) resolves none: a
    default profile that assumes a role would otherwise call STS for a report that never
    calls AWS. ``progress``: papermill's bar of executed cells, on a terminal or in a notebook
    only (in a cron log it would be a frame per cell on one line). Parameters that are not a
    dict, an ``out_dir`` that is a file and a ``kernel_name`` that is not installed are
    refused (``InputError``) before a kernel starts.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from srifty_kit.tables.progress import redraws_in_place

    source = find_notebook(notebook)
    out = _report_folder(parameters, out_dir, kernel_name)
    if "aws_profile" in parameters:  # a report that calls AWS: only it resolves credentials
        _learn_kernel_credentials(parameters["aws_profile"])
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a parent that is a file, no permission
        raise InputError(
            f"cannot make the report folder ({err.strerror})",
            source=str(out),
            fix="give a folder that is there or can be made",
        ) from err
    stem = name or source.stem
    with _one_run_at_a_time(out, stem):  # no other run of this report writes here now
        executed = out / f"{stem}.ipynb"
        running = out / f".{stem}.running.ipynb"
        failed = out / f"{failed_name or stem + '.failed'}.ipynb"
        try:
            with _said_once():
                papermill.execute_notebook(
                    str(source),
                    _scrubbed(running),  # redacted at every save
                    parameters=parameters,
                    kernel_name=kernel_name,
                    cwd=str(out),
                    # papermill's own bar, in a log a frame per cell on one line
                    progress_bar=progress and redraws_in_place(),
                    execution_timeout=timeout_s,
                    kernel_manager_class=_quiet_kernel_manager(),
                )
        except PapermillExecutionError as err:
            os.replace(running, failed)
            if err.ename == "InputError":
                raise InputError(f"{err.evalue} (executed notebook kept at {failed})") from err
            raise ReportFailed(err, failed) from err
        except BaseException as err:  # a dead kernel, a timeout, Ctrl-C: keep what ran, if any
            kept = running.exists()
            if kept:
                os.replace(running, failed)
            stopped = _stopped(err, timeout_s, failed if kept else None)
            if stopped is not None:  # one line, as a failing cell's, not nbclient's traceback
                raise stopped from err
            raise
        os.replace(running, executed)
        failed.unlink(missing_ok=True)  # an earlier failure of this report is now stale
        page = None
        if html:
            page = out / f"{stem}.html"
            text = _html_of(executed, exclude_input)
            atomic_write(page, lambda p: p.write_text(text, encoding="utf-8"))
        return Report(notebook=executed, html=page)


def _report_folder(parameters: object, out_dir: object, kernel_name: str | None) -> Path:
    """The report's folder (resolved), once what a run needs is what it must be.

    Papermill and jupyter_client took these as tracebacks, some after the run's lock was
    taken: parameters of None or a list (TypeError), a file as the folder
    (FileExistsError), a kernel that is not installed (NoSuchKernel).

    Raises:
        InputError: parameters not a mapping, the folder a file or no path, the kernel
            unknown (with "did you mean" and the installed ones).
    """
    if not isinstance(parameters, Mapping):
        raise InputError(
            f"parameters must be a dict of the notebook's parameters, got "
            f"{type(parameters).__name__}",
            fix="e.g. run_report('03_search_ec2', {'deadline_h': 10}, 'reports/'), or {}",
        )
    out = as_path(out_dir, "the report folder").resolve()
    if out.exists() and not out.is_dir():
        raise InputError(
            "is a file, not a folder",
            source=str(out),
            fix="give a folder for the report's files (it is made if missing)",
        )
    if kernel_name is not None:  # None: the notebook's own kernelspec, papermill's to find
        from jupyter_client.kernelspec import KernelSpecManager

        kernels = sorted(KernelSpecManager().find_kernel_specs())
        if kernel_name not in kernels:
            raise InputError(
                f"no Jupyter kernel named {kernel_name!r}{did_you_mean(str(kernel_name), kernels)}",
                fix="use one of " + ", ".join(kernels) + " (`jupyter kernelspec list`)",
            )
    return out


def _learn_kernel_credentials(profile: str | None) -> None:
    """Mask here the AWS credentials the kernel will resolve (an SSO login's, an assumed
    role's, an instance or container role's: in no file and no variable of this process)
    before it prints any: the same chain (``aws_errors.remember_resolved``), for ``profile``
    (the report's ``aws_profile`` parameter) or the environment's. Without AWS configuration
    off EC2 it reads a few files and calls nothing."""
    from srifty_kit.tables.aws_errors import remember_resolved

    remember_resolved(profile)


_held_locks: set[Path] = set()  # the report locks this process holds (a lock nests in it)


@contextlib.contextmanager
def _one_run_at_a_time(out: Path, stem: str) -> Iterator[None]:
    """Hold ``out/.STEM.lock`` (an advisory ``flock``, released by the system when the process
    ends, however it ends) while a run of report ``stem`` writes in ``out``; the file is removed
    when the run is done. Within one process it nests: a caller that holds it (the weekly
    report, around its run and its summary) lets ``run_report`` through.

    Raises:
        ReportBusy: another process holds it: its run of the same report is writing there.
    """
    path = out / f".{stem}.lock"
    try:
        import fcntl
    except ImportError:  # no advisory locks outside POSIX: runs are not kept apart there
        fcntl = None
    if fcntl is None or path in _held_locks:  # held by this process already: its caller's
        yield
        return
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ReportBusy(stem, out, holder) from None
        try:  # the run that held it may have removed the file between our open and lock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _held_locks.add(path)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        _held_locks.discard(path)
        path.unlink(missing_ok=True)  # while still held: no other run can be inside
        os.close(fd)


def _stopped(
    err: BaseException, timeout_s: float | None, kept: Path | None
) -> ReportStopped | None:
    """The one-line failure of a run whose kernel died (killed, out of memory; as it started
    or while a cell ran) or whose cell ran past ``timeout_s``; None for anything else (Ctrl-C,
    a bug), which goes on as it is."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    where = f" (executed notebook kept at {kept})" if kept else ""
    if isinstance(err, DeadKernelError):
        return ReportStopped(
            f"the notebook's kernel died while a cell ran (killed, or out of memory){where}",
            kept,
        )
    if isinstance(err, RuntimeError) and str(err).startswith("Kernel died"):  # jupyter_client's
        return ReportStopped(f"the notebook's kernel died as it started ({err}){where}", kept)
    if isinstance(err, CellTimeoutError):
        limit = f"{timeout_s:g} s" if timeout_s else "its time limit"
        return ReportStopped(f"a cell ran longer than {limit} and was stopped{where}", kept)
    return None


class _KernelDeathSaid(logging.Filter):
    """Drops nbclient's own records of a dead kernel: ``ReportStopped`` says it, in its line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for nbclient's record of a dead kernel, True for every other."""
        return "Kernel died" not in record.getMessage()


@contextlib.contextmanager
def _said_once() -> Iterator[None]:
    """While papermill runs: a dead kernel is said once, by the failure's line."""
    logger = logging.getLogger("papermill")  # the logger papermill hands to nbclient
    said = _KernelDeathSaid()
    logger.addFilter(said)
    try:
        yield
    finally:
        logger.removeFilter(said)


def _quiet_kernel_manager() -> type:
    """nbclient's kernel manager, with the kernel process's own stderr (transport warnings,
    shutdown chatter) sent nowhere: what a cell prints is in the notebook, and a command's
    errors stay one line."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        """An AsyncKernelManager whose kernel writes no stderr of its own."""

        async def start_kernel(self, **kw: Any) -> None:
            """Start the kernel with stderr to /dev/null."""
            kw.setdefault("stderr", subprocess.DEVNULL)
            await super().start_kernel(**kw)

    return QuietKernelManager


class ReportFailed(CommandFailed):
    """A report's cell raised: its error in one line, and where the executed notebook is."""

    def __init__(self, err: Exception, notebook: Path) -> None:
        self.notebook = notebook
        ename = getattr(err, "ename", type(err).__name__)
        evalue = str(getattr(err, "evalue", err)).strip().splitlines()
        cell = getattr(err, "exec_count", None)
        where = f"cell [{cell}] " if cell is not None else "a cell "
        first = evalue[0] if evalue else ""
        super().__init__(f"{where}raised {ename}: {first} (executed notebook kept at {notebook})")


class ReportBusy(CommandFailed):
    """Another run of the same report is writing in the same folder now (a scheduled run and
    one by hand): this one did not start, and nothing of the other's was touched."""

    def __init__(self, stem: str, out: Path, holder: str = "") -> None:
        who = f" (process {holder})" if holder.isdigit() else ""
        super().__init__(
            f"another run of {stem} is writing in {out} now{who}; this one did not start, "
            "and that run's files are untouched: wait for it to end, or write elsewhere (--out)"
        )


class ReportStopped(CommandFailed):
    """A report stopped by no cell's exception: its kernel died (killed, out of memory) or a
    cell ran past the timeout. One line, and where the executed notebook is kept (if any)."""

    def __init__(self, message: str, notebook: Path | None) -> None:
        self.notebook = notebook
        super().__init__(message)


def tagged_outputs(notebook: str | os.PathLike) -> dict[str, list[dict[str, Any]]]:
    """The outputs of an executed notebook's first cell carrying each tag, read once.

    Args:
        notebook: the executed ``.ipynb``.

    Returns:
        {tag: that cell's outputs (nbformat dicts)}; a tag no cell carries is absent.
    """
    import nbformat

    out: dict[str, list[dict[str, Any]]] = {}
    for cell in nbformat.read(Path(notebook), as_version=4).cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            out.setdefault(tag, cell.get("outputs", []))
    return out


def notebook_figures(notebook: str | os.PathLike, folder: str | os.PathLike) -> list[Path]:
    """Write every PNG figure of an executed notebook to ``folder`` (``<stem>_fig<N>.png``)."""
    import base64

    import nbformat

    notebook = Path(notebook)
    nb = nbformat.read(notebook, as_version=4)
    out, n = [], 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if not data:
                continue
            n += 1
            path = Path(folder) / f"{notebook.stem}_fig{n}.png"
            raw = base64.b64decode(data)
            atomic_write(path, lambda p, raw=raw: p.write_bytes(raw))
            out.append(path)
    return out


# --------------------------------------------------------------------------- the weekly report

WEEKLY_NOTEBOOK = "04_weekly_cost_report"


def weekly_parameters(
    week_start: str | dt.date | None,
    ledger: str | os.PathLike | None,
    *,
    engine: str = "duckdb",
    top_n: int = 10,
    models: Sequence[str | os.PathLike] | None = None,
    level: float = 0.9,
    slack: float = 0.25,
    interactive: bool = False,
    athena: dict[str, str | None] | None = None,
    tags: dict[str, Any] | None = None,
    gpu_catalog: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """The weekly notebook's parameters, checked before any kernel starts, as the plain
    types papermill passes: the week as the ISO date of its Monday, paths made absolute (the
    notebook runs in the output folder), the ledger's format recognised from its columns, the
    tag mapping and GPU catalog read, every model file loaded (a truncated one is refused here,
    not in the kernel)."""
    from srifty_kit.present.weekly import check_options, open_ledger, parse_week, read_gpu_catalog
    from srifty_kit.tables.ledger import DuckDBLedger
    from srifty_kit.tables.usage_sql import detect_format, tag_map

    week = parse_week(week_start)
    check_options(engine, top_n, level, slack)
    tag_keys = {k: list(v) for k, v in tag_map(tags).items()}
    read_gpu_catalog(gpu_catalog)
    gpu_catalog = str(Path(gpu_catalog).resolve()) if gpu_catalog else None
    athena = {k: v for k, v in (athena or {}).items() if v is not None}
    if engine == "athena":
        open_ledger(engine="athena", **athena)  # checks what Athena needs, calls nothing
        ledger_path = None
    else:
        if athena:
            raise InputError(
                "Athena options given with the duckdb engine",
                fix="use --engine athena (implied by --athena-table) or drop them",
            )
        # abspath, not resolve(): a symlink loop is the ledger reader's to name in one line
        ledger_path = os.path.abspath(ledger) if ledger else None
        files = open_ledger(ledger_path)
        if isinstance(files, DuckDBLedger):
            detect_format(files.columns(), files.label)
    model_paths = None
    if models is not None:
        model_paths = []
        for path in models:
            if not Path(path).is_file():
                raise InputError("model or profile not found", source=str(path), fix="check it")
            _check_model_source(path)
            model_paths.append(os.path.abspath(path))
    given = week_start if isinstance(week_start, dt.date) else None
    if isinstance(given, dt.datetime):
        given = given.date()
    if given is None and week_start:
        given = dt.date.fromisoformat(str(week_start).strip())  # parse_week accepted it
    return {
        # the day as given (the notebook names the week it stands for); files use its Monday
        "week_start": (given or week).isoformat(),
        "ledger": ledger_path,
        "engine": engine,
        "top_n": int(top_n),
        "interactive": bool(interactive),
        "models": model_paths,
        "level": float(level),
        "slack": float(slack),
        "tags": tag_keys,
        "gpu_catalog": gpu_catalog,
        **{
            key: athena.get(key)
            for key in (
                "athena_database",
                "athena_table",
                "athena_output",
                "athena_workgroup",
                "aws_profile",
                "aws_region",
            )
        },
    }


def _check_model_source(path: str | os.PathLike) -> None:
    """Read a model file (or a profile's table) now, so a truncated or wrong one is one line
    before a kernel starts; fitting a profile is left to the report."""
    from srifty_kit.model.estimator import StepTimeModel
    from srifty_kit.tables.files import read_table

    if str(path).lower().endswith(".json"):
        StepTimeModel.load(path)
    else:
        read_table(path)


def weekly_report_name(week_start: dt.date | str) -> str:
    """The file stem of a week's report: ``weekly_cost_2026-11-23``."""
    return f"weekly_cost_{week_start if isinstance(week_start, str) else week_start.isoformat()}"


def run_weekly_report(
    week_start: str | dt.date | None,
    ledger: str | os.PathLike | None,
    out_dir: str | os.PathLike,
    *,
    engine: str = "duckdb",
    top_n: int = 10,
    models: Sequence[str | os.PathLike] | None = None,
    level: float = 0.9,
    slack: float = 0.25,
    interactive: bool = False,
    progress: bool = True,
    timeout_s: float | None = 1800,
    tags: dict[str, Any] | None = None,
    gpu_catalog: str | os.PathLike | None = None,
    **athena: str | None,
) -> Report:
    """Run the weekly cost report for the week starting ``week_start`` (None: the last full
    week) over ``ledger`` (a CUR, FOCUS or jobs ledger file or folder; None: the packaged
    sample) or, with ``engine="athena"``, the Athena table named in ``athena``
    (athena_database, athena_table, athena_output, athena_workgroup, aws_profile, aws_region).

    Writes ``weekly_cost_<week>.ipynb`` (executed) and ``.html`` (no code cells, figures
    embedded) in ``out_dir``, each atomically, so a rerun replaces the week's report, and
    ``weekly_cost_<week>.json``: the report's numbers (``WeeklyReport.summary``: the headline
    per currency and the reconciliation of every row of the week). A cell that fails raises
    ``ReportFailed`` and keeps ``weekly_cost_<week>.failed.ipynb``. ``tags`` maps job, team,
    model, local_bsz to the ledger's tag keys; ``gpu_catalog`` gives other providers' types'
    GPU counts. A ``week_start`` that is not a Monday stands for its Monday-to-Sunday week.
    """
    params = weekly_parameters(
        week_start,
        ledger,
        engine=engine,
        top_n=top_n,
        models=models,
        level=level,
        slack=slack,
        interactive=interactive,
        athena=athena,
        tags=tags,
        gpu_catalog=gpu_catalog,
    )
    # what the kernel's AWS session prints is masked here too: run_report learns its
    # credentials from params["aws_profile"]
    from srifty_kit.present.weekly import parse_week

    name = weekly_report_name(parse_week(params["week_start"]))
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # the summary is read from this run's notebook: no other run may replace it meanwhile
    with _one_run_at_a_time(out, name):
        report = run_report(
            WEEKLY_NOTEBOOK,
            params,
            out,
            name=name,
            exclude_input=True,
            progress=progress,
            timeout_s=timeout_s,
        )
        _write_weekly_summary(report, out / f"{name}.json")
    return report


def _write_weekly_summary(report: Report, path: Path) -> None:
    """The summary the notebook recorded (its cell tagged ``summary``) as a JSON file."""
    from srifty_kit.present.weekly import SUMMARY_MIME
    from srifty_kit.tables.files import write_json

    for output in tagged_outputs(report.notebook).get("summary", []):
        bundle = output.get("data", {})
        # application/json: where a copy of the notebook from before SUMMARY_MIME put it
        data = bundle.get(SUMMARY_MIME, bundle.get("application/json"))
        if data is not None:
            write_json(data, path)
            return
