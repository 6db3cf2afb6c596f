"""The ``srifty`` command: one subcommand per module of this package, each thin.

``main`` is the one place that sets up what every command shares: SIGINT and SIGTERM end any
command promptly and cleanly, from its first moment (whatever the shell left them as), bad
input is one line and exit code 2, warnings are one line each, an interrupt exits 130
(SIGINT) or 143 (SIGTERM) after the command has kept what it measured, and a reader that
stops reading (``srifty catalog show | head``) ends the command quietly with 141, as it ends
``cat``. Every error line, warning, log record and traceback goes through
``srifty_kit.tables.redact``: no credential leaves the process.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
import warnings
from collections.abc import Sequence

from srifty_kit import errors
from srifty_kit.cli import _THE_COMMAND, _held, _record_interrupt
from srifty_kit.cli.flags import check_paths, for_command_line
from srifty_kit.errors import CommandFailed, InputError
from srifty_kit.tables.redact import install as install_redaction
from srifty_kit.tables.redact import redact

# Each module defines ``register(subparsers)``, adding its subcommands with ``func`` set to a
# callable taking the parsed arguments and returning an exit code (None means 0).
_SUBCOMMAND_MODULES: tuple[str, ...] = ("catalog", "model", "profile", "search", "demo", "report")


class _Parser(argparse.ArgumentParser):
    """argparse with errors in one line (the usage is one ``--help`` away)."""

    _given: list[str] = []  # the arguments this parser was last given (parse_known_args)

    def error(self, message: str) -> None:
        """Print ``message`` as one line and exit 2 (argparse's hook for a bad command line)."""
        if message.startswith("the following arguments are required"):
            # argparse says a flag is missing before it says one given was unknown: with
            # '--measurment p.csv' the user did give it, misspelt; say which and the one meant
            unknown = [t for t in self._given if t.startswith("--") and not self._knows(t)]
            if unknown:
                message += f"; unrecognized arguments: {' '.join(unknown)}"
                message += self._closest_flag(unknown)
        # argparse quotes the bad value: a URL's password must not be echoed
        self.exit(2, redact(f"{self.prog}: error: {message}; see `{self.prog} --help`\n"))

    def parse_known_args(self, args=None, namespace=None):
        """argparse's ``parse_known_args``, keeping the arguments given for ``error``.

        Returns:
            The parsed arguments and those left unknown, as argparse's does.
        """
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _knows(self, token: str) -> bool:
        """Whether ``token`` ('--out=x' included) is a flag of this parser or a prefix of one
        (argparse takes an unambiguous prefix)."""
        name = token.split("=")[0]
        return any(s.startswith(name) for s in self._option_string_actions)

    def _closest_flag(self, tokens: list[str]) -> str:
        """' (did you mean ...?)' for the first flag-like token, or ''; never '--help': a
        misspelt flag is not a request for help."""
        flags = [s for s in self._option_string_actions if s[:2] == "--" and s != "--help"]
        first = next((t.split("=")[0] for t in tokens if t.startswith("-")), None)
        return errors.did_you_mean(first, flags) if first else ""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # argparse lists the choices; a near miss ('costs', 'shwo') also gets the one meant
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as err:
            hint = errors.did_you_mean(value, action.choices or ())
            raise argparse.ArgumentError(action, err.message + hint) from None

    def parse_args(self, args=None, namespace=None):
        """argparse's ``parse_args``; an unknown flag is said by the subcommand given it.

        argparse leaves it to the top parser, whose line would name ``srifty`` and no flag:
        here it names ``srifty catalog show`` and its closest flag (``--fromat`` -> did you
        mean '--format'?). Exits 2 with that one line; returns the parsed arguments.
        """
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = _innermost(self, parsed)
            hint = parser._closest_flag(extras)
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed


def _innermost(parser: argparse.ArgumentParser, parsed: argparse.Namespace):
    """The (sub)command parser that ``parsed`` went down to: ``srifty catalog show``'s for
    ``srifty catalog show ...``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None))
            if chosen is not None:
                return _innermost(chosen, parsed)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="srifty",
        description="Pick the EC2 configuration for a training job: profile, fit, search.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in _SUBCOMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(subparsers)
    return parser


def _handle_signals() -> None:
    """Make SIGINT and SIGTERM interrupt the command, even where they were inherited ignored.

    A background job of a non-interactive shell starts with SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler: Ctrl-C (or ``kill -INT``) would be ignored for the
    whole run. Schedulers and ``timeout`` send SIGTERM, whose default kills the process
    before it can save what it measured.
    """
    signal.signal(signal.SIGINT, errors.on_interrupt)
    signal.signal(signal.SIGTERM, errors.on_interrupt)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = redact(" ".join(str(message).split()))
    print(f"srifty: warning: {text}", file=sys.stderr if file is None else file)


def _stdout_closed() -> bool:
    """Whether the reader of stdout has gone (``| head`` exited): a broken pipe on stdout.

    Where it cannot tell (no poll, stdout not a file descriptor), it says yes: the command
    was writing its output when the pipe broke, which is where a broken pipe comes from.
    """
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
    except (AttributeError, OSError, ValueError):
        return True
    poller.register(fd, select.POLLOUT)
    # a pipe whose reader closed it polls as an error for its writer
    return any(event & select.POLLERR for _, event in poller.poll(0))


def _quiet_on_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's flush at exit then finds no broken pipe
    (Python's own recipe, 'Note on SIGPIPE' in the signal module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout is no file descriptor (a test)
        pass


def _check_tqdm_environment() -> None:
    """Raise ``InputError`` naming the ``TQDM_*`` variables when tqdm cannot read them: tqdm
    reads them as it is imported (by the profiler, by torch), where a value of the wrong kind
    would end the command in a traceback."""
    names = sorted(k for k in os.environ if k.startswith("TQDM_"))
    if not names:  # nothing to read: no import here
        return
    try:
        import tqdm  # noqa: F401
    except ValueError as err:
        given = ", ".join(f"{n}={os.environ[n]!r}" for n in names)
        raise InputError(
            f"tqdm cannot read the environment's {given} ({err}); to fix: unset it, or give "
            "it a value of its kind (a number of seconds for TQDM_MININTERVAL, 1 for "
            "TQDM_DISABLE)"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``srifty`` command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 done, 1 a command's negative answer (e.g. nothing fits), 2 bad
        input (one line on stderr), 130 / 143 interrupted by SIGINT / SIGTERM, 141 its
        output's reader went away (a pipe into ``head``), without a word.
    """
    errors.interrupted_by.clear()  # a command called again in one process starts afresh
    # held from here (or from this module's import, in the command's process) until the
    # arguments are known
    signal.signal(signal.SIGINT, _record_interrupt)
    signal.signal(signal.SIGTERM, _record_interrupt)
    # every log record and a bug's traceback are redacted like the error lines below
    install_redaction()
    warnings.showwarning = _one_line_warning
    command, code, unwound, args, started = "srifty", 0, False, None, False
    try:
        try:
            args = build_parser().parse_args(argv)
        finally:
            _handle_signals()
            errors.interrupted_by.extend(_held)  # raised below, with the arguments known
            _held.clear()
        command = args.prog  # 'srifty report weekly', as argparse names it in its own errors
        errors.check_interrupt()  # one recorded while parsing, or that a library swallowed
        _check_tqdm_environment()  # before check_paths, whose imports bring torch's tqdm
        check_paths(args)  # no output over an input or another output, before any work
        started = True
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left shows here, not in the flush at exit
    except InputError as err:
        if not errors.interrupted_by:
            print(redact(f"{command}: error: {for_command_line(err, args)}"), file=sys.stderr)
            return 2
        unwound = True
    except CommandFailed as err:  # the command ran and failed; what it had done is kept
        if not errors.interrupted_by:
            print(redact(f"{command}: error: {err}"), file=sys.stderr)
            return 1
        unwound = True
    except KeyboardInterrupt:
        code, unwound = 130, True
    except BrokenPipeError:
        if not _stdout_closed():  # another pipe (a worker's) broke: a bug, with its traceback
            raise
        # The reader of our output stopped reading (`srifty catalog show | head -5`): what
        # it wanted it has. Exit as `cat` and `yes` do there, without a word: they die of
        # SIGPIPE, which the shell reports as 128 + 13 = 141. Python ignores SIGPIPE (hence
        # this exception), so say 141 ourselves: `set -o pipefail` scripts see what they see
        # of any Unix tool, and it follows the 128 + signal of the interrupts above. (Python's
        # own recipe exits 1, which would read as "nothing fits" from srifty search.)
        _quiet_on_stdout()
        return 128 + signal.SIGPIPE
    except BaseException:
        # an interrupt can surface as another exception: arriving inside an extension
        # module's import, numpy re-raises it as ImportError. Without one, a bug: traceback.
        if not errors.interrupted_by:
            raise
        unwound = True
    if unwound:  # the command did not get to say it was interrupted: say it here
        said = "terminated" if signal.SIGTERM in errors.interrupted_by else "interrupted"
        # before the command started, it may say what it left (an older output as it was)
        at_start = getattr(args, "at_start", None) if not started else None
        print((at_start and at_start(args)) or f"{command}: {said}", file=sys.stderr)
    # a command that caught the interrupt itself (to save what it measured) returns normally
    code = 128 + errors.interrupted_by[-1] if errors.interrupted_by else code
    if errors.interrupted_by and _THE_COMMAND:
        # Finishing on a signal, its last line said: later ones (timeout's second, to the
        # process group) are only recorded until here. Ignore them to the exit: the
        # interpreter's shutdown puts back the default action of a handled signal, and one
        # arriving then would kill the process by it, without the 130 or 143 said here.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    errors.interrupted_by.clear()  # handled: later work in this process is not interrupted
    return code
