"""The one redaction of credentials from every string that leaves the process: error lines,
warnings, log records, tracebacks, notebook outputs and HTML reports.

``redact(text)`` replaces, with ``***``:

- the values of ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (and
  the legacy ``AWS_SECURITY_TOKEN``) in the environment, and of the credentials an AWS caller
  registered with ``remember_credentials`` (a profile's keys, an assumed role's token), also
  URL-encoded;
- anything shaped like an AWS access key id (``AKIA``/``ASIA``/... and 16 more characters);
- the values of a SigV4 ``Credential=``, ``Signature=``, an ``X-Amz-Security-Token`` header or
  query parameter, an ``Authorization`` header, and ``aws_secret_access_key``-style fields;
- the password of a URL's userinfo (``https://user:***@host``).

Only the standard library is used, so that every layer can import this module.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
from typing import Any
from urllib.parse import quote

MASK = "***"
# environment variables whose values are credentials (botocore reads all four)
SECRET_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
)
# Shorter values are not masked wherever they occur: real keys are 20 (id) and 40 (secret)
# characters, and masking a placeholder such as "test" would garble paths and words.
MIN_SECRET_LENGTH = 8

_remembered: set[str] = set()

# characters of a header value or parameter: up to a blank, a quote, markup or a separator
# (a backslash is kept inside: a JSON-escaped "\/" must not end a token early)
_END = r"""[^\s,;&'"<>]"""
# after a field name: its optional quote (a repr'd dict), ':' or '=', an optional b'...' prefix;
# atomic, so that the "already masked" lookahead after it cannot be dodged by backtracking
_FIELD = r"""(?>['"]?\s*[:=]\s*(?:b(?=['"]))?['"]?)"""
# (pattern, replacement, needles): a pattern runs only where the text holds one of its
# needles (lowercased, or as written for key ids); a substring test is ~50x cheaper than a
# regex scan, and most text (a report's HTML, a notebook) holds none
_PATTERNS: tuple[tuple[re.Pattern[str], str, tuple[str, ...], bool], ...] = (
    # Authorization: scheme, then its comma/semicolon separated parameters (SigV4, Basic,
    # Bearer); an already-masked value is left alone so that redacting twice changes nothing
    (
        re.compile(
            rf"(?i)(\b(?:proxy-)?authorization{_FIELD})(?!\*\*\*)"
            rf"(?:[A-Za-z0-9_-]+[ \t]+)?{_END}+(?:,[ \t]*{_END}+|;{_END}+)*"
        ),
        rf"\1{MASK}",
        ("authorization",),
        True,
    ),
    # SigV4 pieces in headers and presigned URLs
    (re.compile(rf"(?i)(\b(?:X-Amz-)?Credential=){_END}+"), rf"\1{MASK}", ("credential=",), True),
    (re.compile(rf"(?i)(\b(?:X-Amz-)?Signature=){_END}+"), rf"\1{MASK}", ("signature=",), True),
    (
        re.compile(
            rf"(?i)(\b(?:x-amz-security-token|aws_session_token|aws_security_token|"
            rf"aws_secret_access_key|secret_?access_?key|session_?token){_FIELD}){_END}+"
        ),
        rf"\1{MASK}",
        ("token", "secret"),
        True,
    ),
    # access key ids: long-term (AKIA), temporary (ASIA) and the other documented prefixes
    (
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
        MASK,
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        False,
    ),
    # a URL's userinfo password: scheme://user:password@host
    (
        re.compile(r"""(?i)(\b[a-z][a-z0-9+.\-]{0,31}://[^/\s:@'"<>]*):[^/\s@'"<>]*@"""),
        rf"\1:{MASK}@",
        ("://",),
        False,
    ),
)


def remember_credentials(credentials: Any) -> None:
    """Add the values of botocore credentials (or any object with ``access_key``,
    ``secret_key``, ``token``) to what ``redact`` masks, for the life of the process.

    AWS callers pass what their session resolved (``session.get_credentials()``), which may
    come from a profile or an assumed role rather than the environment.

    Args:
        credentials: botocore ``Credentials`` (frozen or not), or None (nothing to add).
    """
    if credentials is None:
        return
    frozen = getattr(credentials, "get_frozen_credentials", None)
    values = frozen() if callable(frozen) else credentials
    remember(
        getattr(values, "access_key", None),
        getattr(values, "secret_key", None),
        getattr(values, "token", None),
    )


def remember(*values: str | None) -> None:
    """Add literal secret values to what ``redact`` masks (empty and short ones are ignored)."""
    for value in values:
        if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
            _remembered.add(value)


def secrets() -> list[str]:
    """The literal values masked now: the environment's credentials and those remembered,
    with their URL-encoded forms, longest first."""
    values = {os.environ.get(name, "") for name in SECRET_VARIABLES} | _remembered
    values = {v for v in values if len(v) >= MIN_SECRET_LENGTH}
    values |= {quote(v, safe="") for v in values}
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***`` (see the module docstring).

    Args:
        text: any string about to leave the process (a non-string is turned into one).

    Returns:
        The text, unchanged where it held no credential; redacting twice changes nothing.
    """
    text = text if isinstance(text, str) else str(text)
    for value in secrets():
        if value in text:
            text = text.replace(value, MASK)
    lower = None
    for pattern, replacement, needles, folded in _PATTERNS:
        if folded:
            lower = text.lower() if lower is None else lower
        haystack = lower if folded else text
        if any(n in haystack for n in needles):
            text = pattern.sub(replacement, text)
            lower = None  # the text changed
    return text


# mime types whose payload is base64: masking cannot apply and would cost time on megabytes
_BINARY_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")


def scrub(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings: a notebook, a response) with every
    string redacted; base64 image payloads are kept as they are.

    Args:
        value: nested dicts, lists and scalars (an ``nbformat.NotebookNode`` is a dict).

    Returns:
        The same structure (dicts of the same type) with redacted strings.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return type(value)((k, v if k in _BINARY_MIME else scrub(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value)(scrub(v) for v in value)
    return value


def scrub_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact a log record in place: its message (arguments merged in), the formatted
    traceback of its exception and its stack; return it."""
    try:
        text = record.getMessage()
    except Exception:  # a malformed record: logging reports it when it formats it
        return record
    clean = redact(text)
    if clean != text:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        # what logging.Formatter.formatException would print, set so that it is used
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


class RedactFilter(logging.Filter):
    """A logging filter that redacts each record (and keeps every record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True."""
        scrub_record(record)
        return True


_installed: dict[str, Any] = {}


def install_logging() -> None:
    """Redact every log record of the process when it is created, whatever logger or handler
    it goes to (botocore's debug records hold signed headers). Idempotent.

    A record factory is used rather than a filter on some loggers or handlers: filters on a
    logger miss its children's records, and handlers added later (a notebook's, a test's)
    would have none.
    """
    if "factory" in _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return scrub_record(previous(*args, **kwargs))

    _installed["factory"] = factory
    logging.setLogRecordFactory(factory)


def install_excepthook() -> None:
    """Print uncaught exceptions (a bug's traceback) redacted. Idempotent."""
    if "excepthook" in _installed:
        return

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(redact(text))

    _installed["excepthook"] = hook
    sys.excepthook = hook


def install() -> None:
    """``install_logging`` and ``install_excepthook``: what a command calls at its start."""
    install_logging()
    install_excepthook()
