"""What every command shares: exit codes, reading input, writing JSON, settings.

Only the standard library at module level: ``apportion --help`` imports every command
module to build its parser, and must start in well under a second.
"""

from __future__ import annotations

import codecs
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.config.settings import Settings
    from apportion.contracts import Envelope
    from apportion.engine_settings import EngineSettings

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INFEASIBLE = 3
EXIT_REJECTED = 4

STATUS_EXIT = {"ok": EXIT_OK, "infeasible": EXIT_INFEASIBLE, "rejected": EXIT_REJECTED}

# The built-in kinds, written out: reading the registry (apportion.kinds) imports pydantic
# and the contracts, which `apportion --help` must not wait for. A unit test holds these
# to the registry (an event kind's summary starts with "(event)").
JOB_KIND_NAMES = ("auto_attach", "guest_host_attach", "heal_org", "launch_select", "partition")
EVENT_KIND_NAMES = ("launch_outcome",)
KIND_NAMES = JOB_KIND_NAMES + EVENT_KIND_NAMES
KIND_HELP = f"job kind: {', '.join(KIND_NAMES)}"


class UsageError(Exception):
    """A mistake in the command line; exit 2 with the message."""


class CommandFailed(Exception):
    """The command could not do its work (Redis unreachable, timeout); exit 1."""


class InputTooLarge(UsageError):
    """The input is longer than the command's limit (only that much was read)."""


class InputNotText(UsageError):
    """The input is not UTF-8 text (so not JSON either)."""


def read_input(source: str, *, max_chars: int, limit_name: str, unit: str = "characters") -> str:
    """The text of file ``source`` (``-``: stdin), reading at most ``max_chars`` + 1
    characters: an endless input (``/dev/zero``, a pipe) is refused, not read to the end.

    Raises InputTooLarge naming ``limit_name`` (the setting that sets ``max_chars``).
    ``unit`` "bytes" for a limit in bytes: more characters than that are more bytes too.
    """
    where = "stdin" if source == "-" else source
    try:
        if source == "-":
            # Strict UTF-8: the text layer's own errors handler may be surrogateescape
            # (a C locale), which would turn bytes that are not text into lone surrogates.
            raw = getattr(sys.stdin, "buffer", None)
            if raw is None:  # a text stream without bytes beneath (a test's StringIO)
                text = sys.stdin.read(max_chars + 1)
            else:
                text = codecs.getreader("utf-8")(raw).read(chars=max_chars + 1)
        else:
            with Path(source).open(encoding="utf-8") as f:
                text = f.read(max_chars + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputNotText(
            f"{where} is not UTF-8 text: {exc.reason} (byte 0x{exc.object[exc.start]:02x})"
        ) from exc
    if len(text) > max_chars:
        raise InputTooLarge(f"{where} exceeds the limit of {max_chars} {unit} ({limit_name})")
    return text


PAYLOAD_LIMIT = "APPORTION_LIMITS__MAX_PAYLOAD_BYTES"


def read_payload(source: str) -> str:
    """A job or an envelope as text, at most the engine's payload limit."""
    limit = engine_settings().limits.max_payload_bytes
    return read_input(source, max_chars=limit, limit_name=PAYLOAD_LIMIT, unit="bytes")


def read_jobs(kind: str, source: str) -> tuple[list[Any], bool, Envelope | None]:
    """The jobs in ``source`` (see :func:`jobs_from_text`); one too large is rejected
    as the engine rejects it, naming the limit."""
    jobs, is_array, bad, _ = read_vouched_jobs(kind, source)
    return jobs, is_array, bad


def read_vouched_jobs(kind: str, source: str) -> tuple[list[Any], bool, Envelope | None, bool]:
    """:func:`read_jobs`, and whether the text vouches for every job's shape (the
    ``vouched`` of :func:`apportion.engine.run`)."""
    from apportion.contracts import Envelope
    from apportion.engine import error_info
    from apportion.errors import Rejected

    try:
        text = read_payload(source)
    except InputTooLarge as exc:
        refused = Rejected.at("$", str(exc), code="too_large")
        return [], False, Envelope.rejected(None, kind, error_info(refused)), False
    except InputNotText as exc:
        refused = Rejected.at("$", f"not valid JSON: {exc}", code="malformed_json")
        return [], False, Envelope.rejected(None, kind, error_info(refused)), False
    return jobs_from_text(kind, text)


def print_json(data: Any, pretty: bool | None = None) -> None:
    """Write ``data`` as JSON: compact for programs, indented on a terminal or when asked."""
    from apportion.codec import encode

    if pretty is None:
        pretty = sys.stdout.isatty()
    sys.stdout.flush()
    sys.stdout.buffer.write(encode(data, pretty=pretty) + b"\n")
    sys.stdout.buffer.flush()


def settings() -> Settings:
    """The worker's settings (commands that reach Redis)."""
    from apportion.config.settings import get_settings

    try:
        return get_settings()
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        raise UsageError(f"invalid APPORTION_* configuration: {config_error(exc)}") from exc


def config_error(exc: ValueError) -> str:
    """A settings error in one line per problem, each naming its variable (never a value:
    a URL holds a password)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    lines = []
    for error in errors(include_input=False, include_url=False):
        where = "__".join(str(part) for part in error["loc"]).upper()
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"APPORTION_{where}: {message}" if where else message)
    return "; ".join(lines)


@functools.cache
def engine_settings() -> EngineSettings:
    """What answering a job in-process needs (solve, explain): no service packages."""
    from apportion.engine_settings import EngineSettings

    try:
        return EngineSettings()
    except ValueError as exc:
        raise UsageError(f"invalid APPORTION_* configuration: {config_error(exc)}") from exc


def check_kind(kind: str) -> None:
    from apportion import kinds

    engine_settings()  # loads APPORTION_KIND_MODULES: a deployment's own kinds are valid too
    if kind not in kinds.REGISTRY:
        raise UsageError(f"unknown kind {kind!r}; choose one of: {', '.join(kinds.names())}")


def jobs_from_text(kind: str, text: str) -> tuple[list[Any], bool, Envelope | None, bool]:
    """Parse the input: (jobs, was_array, rejection envelope if the text is not JSON,
    whether the text vouches for every job's shape)."""
    from apportion.contracts import Envelope
    from apportion.edge import load_bounded
    from apportion.engine import error_info
    from apportion.errors import Rejected

    limits = engine_settings().limits
    try:
        data, bounds = load_bounded(text, limits)
    except Rejected as exc:
        return [], False, Envelope.rejected(None, kind, error_info(exc)), False
    is_array = isinstance(data, list)
    # An array's jobs are one level inside the text the bounds were read from.
    vouched = bounds is not None and bounds.vouch(limits, level=1 if is_array else 0)
    return (data if is_array else [data]), is_array, None, vouched


def redis_location(url: str) -> str:
    """``url`` without its password, for messages (never print a secret)."""
    from apportion.workers.redis.client import redact_url

    return redact_url(url)


def add_pretty(parser: Any) -> None:
    import argparse

    parser.add_argument(
        "--pretty",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="indent the JSON (default: only when writing to a terminal)",
    )
