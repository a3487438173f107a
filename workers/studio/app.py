"""The studio's web server: one page, its static files, and a small JSON API.

Starlette routes, every API call through :class:`~.guard.Guard` (token, Host, same
origin). Endpoints (all JSON; errors as ``{"error": {code, message, details}}`` with
``details`` naming each field, as a rejected envelope does):

* ``GET  /api/state`` — pools, deployables on offer, limits;
* ``GET  /api/policy?pool=P&limit=N`` — the policy the pool's jobs get now, and its
  newest N (50; at most 1000) versions without their bodies;
* ``GET  /api/policy/version?pool=P&version=N`` — one version, its policy included;
* ``GET  /api/policy/diff?pool=P&version=N`` — version N against the current one;
* ``POST /api/deployables/select`` ``{"id"}`` — compute an offered job's candidates;
* ``POST /api/deployables/upload`` (the job as the body) — validate and compute;
* ``POST /api/evaluate`` ``{"deployable", "policy"}`` — groups, trace, no-chance list;
* ``POST /api/simulate`` ``{"deployable", "policy", "launches", "seed"}``;
* ``POST /api/save`` ``{"pool", "policy", "author", "comment", "force"}`` — a new
  version, after a dry run on the pool's recent jobs and the examples
  (workers/policies/dryrun.py): a version rejecting every one is answered 409
  ``dry_run_refused`` with the report unless ``force`` is true.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apportion.codec import encode
from apportion.contracts.policy import DEFAULT_POOL
from apportion.engine import error_info, parse_json_text
from apportion.errors import DomainError, InfrastructureError, Rejected
from apportion.limits import Limits
from apportion.selection.memo import ExpressionMemo
from apportion.workers.policies import dryrun
from apportion.workers.policies.store import (
    MAX_AUTHOR,
    MAX_COMMENT,
    PolicyStore,
    PolicyVersion,
    diff,
)
from apportion.workers.studio import deployable as dep
from apportion.workers.studio.guard import Guard

log = logging.getLogger("apportion.studio")
STATIC = Path(__file__).resolve().parent / "static"

# Served with every response: the page loads only its own files (no CDN, no inline
# script), is never framed by another site, and leaks no URL to others.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


# A policy request is small: the modules and an expression of bounded length.
MAX_REQUEST_BYTES = 1024 * 1024
# /api/policy lists the newest versions without their bodies: this many unless asked.
HISTORY_SHOWN = 50
MAX_HISTORY_SHOWN = 1000
MAX_ID = 400
MAX_POOL = 200
MAX_LABEL = 200


@dataclass(frozen=True)
class Offer:
    """A deployable the page can pick, not computed until it is picked."""

    id: str
    label: str
    source: str
    load: Callable[[], Any]  # the job, as JSON data


@dataclass(frozen=True)
class Upload:
    """An uploaded job's text on disk, to compute again once its deployable is let go."""

    id: str
    label: str
    path: Path


@dataclass
class StudioConfig:
    limits: Limits
    token: str | None = None
    loopback_only: bool = True
    examples: Path | None = None
    # The config file's default policy: shown for a pool when the store has none at all.
    config_policy: Sequence[Mapping[str, Any]] | None = None
    max_upload_bytes: int = 8 * 1024 * 1024
    # Computed deployables kept in memory: at most this many, whose JSON comes to at
    # most loaded_bytes (a larger one is kept alone). A computed job takes several times
    # its JSON's size, so this bounds the studio's memory (bench/studio.md).
    max_deployables: int = 8
    loaded_bytes: int = 8 * 1024 * 1024
    # Uploaded jobs' text kept on disk (a temporary folder) to compute again when picked.
    uploads_kept: int = 32
    # Seconds a client has to send a request's whole body (408 and closed after).
    body_timeout: float = 30.0
    max_launches: int = 10_000
    # Each recent launch_select job, as JSON data, newest first (workers/studio/recent.py).
    recent_jobs: Callable[[], list[Any]] | None = None
    failures: dep.FailureCounts | None = None
    # The URL the browser sees the studio at behind a reverse proxy (guard.Guard).
    public_origin: str | None = None


@dataclass
class Studio:
    config: StudioConfig
    store: PolicyStore
    # id -> (the computed deployable, its JSON's size), least recently used first.
    _deployables: OrderedDict[str, tuple[dep.Deployable, int]] = field(default_factory=OrderedDict)
    _uploaded: OrderedDict[str, Upload] = field(default_factory=OrderedDict)
    _folder: tempfile.TemporaryDirectory[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Expression modules' values while what they read is unchanged (a slider moves).
    expression_memo: ExpressionMemo = field(default_factory=lambda: ExpressionMemo(16))

    # ---- deployables ---------------------------------------------------------------

    def offers(self) -> list[Offer]:
        out = [
            Offer(ident, label, "example", read)
            for ident, label, read in dryrun.example_jobs(self.config.examples, self.config.limits)
        ]
        for job in self._recent():
            ident, label, _ = dryrun.recent_entry(job)
            out.append(Offer(ident, label, "recent", _constant(job)))
        return out

    def _recent(self) -> list[Any]:
        """The recent jobs kept by the workers; none when Redis does not answer, so the
        examples are still offered (and picked) without it."""
        if self.config.recent_jobs is None:
            return []
        try:
            return self.config.recent_jobs()
        except InfrastructureError as exc:
            log.warning("the recent launch_select jobs are not offered: %s", exc)
            return []

    def deployable(self, ident: str) -> dep.Deployable:
        with self._lock:
            found = self._deployables.get(ident)
            if found is not None:
                self._deployables.move_to_end(ident)
                return found[0]
        # Let go to keep memory bounded: its upload is still on disk.
        if ident in self._uploaded:
            return self.select(ident)
        raise Rejected.at("deployable", f"no deployable {ident!r} is loaded; pick one again")

    def select(self, ident: str) -> dep.Deployable:
        with self._lock:
            if ident in self._deployables:
                self._deployables.move_to_end(ident)
                return self._deployables[ident][0]
            upload = self._uploaded.get(ident)
        if upload is not None:
            try:
                body = upload.path.read_bytes()
            except OSError:
                raise Rejected.at("id", f"the upload {ident!r} is gone; upload it again") from None
            return self._build(ident, upload.label, "upload", len(body), lambda: self._parse(body))
        offer = next((o for o in self.offers() if o.id == ident), None)
        if offer is None:
            raise Rejected.at("id", f"no deployable {ident!r} is on offer")
        job = offer.load()
        return self._build(offer.id, offer.label, offer.source, len(encode(job)), lambda: job)

    def upload(self, body: bytes, name: str) -> dep.Deployable:
        """Validate and compute an uploaded job; its text is kept on disk (the newest
        ``uploads_kept``), the computed deployable in the bounded memory of the others."""
        ident = f"upload:{_digest(body)}"
        label = f"uploaded: {name or ident[7:19]}"
        # Parsed once: a job the engine rejects is neither kept nor written.
        found = self._build(ident, label, "upload", len(body), _constant(self._parse(body)))
        self._store_upload(ident, label, body)
        return found

    def uploads(self) -> list[Upload]:
        with self._lock:
            return list(self._uploaded.values())

    def in_memory(self) -> list[str]:
        """The ids of the computed deployables kept, least recently used first."""
        with self._lock:
            return list(self._deployables)

    def _parse(self, body: bytes) -> Any:
        return parse_json_text(body, self.config.limits)

    def _build(
        self, ident: str, label: str, source: str, size: int, job: Callable[[], Any]
    ) -> dep.Deployable:
        """The deployable computed from ``job()`` and kept, after room is made for it:
        the least recently used ones are let go first, so that memory holds at most
        ``max_deployables`` whose JSON comes to ``loaded_bytes`` (one larger job alone)."""
        with self._lock:
            self._make_room(size)
        built = dep.load(job(), ident=ident, label=label, source=source, limits=self.config.limits)
        with self._lock:
            self._make_room(size)
            self._deployables[ident] = (built, size)
        return built

    def _make_room(self, size: int) -> None:
        config = self.config
        while self._deployables and (
            len(self._deployables) >= config.max_deployables
            or sum(s for _, s in self._deployables.values()) + size > config.loaded_bytes
        ):
            self._deployables.popitem(last=False)

    def _store_upload(self, ident: str, label: str, body: bytes) -> None:
        folder = self._upload_folder()
        path = folder / f"{ident[7:]}.json"
        path.write_bytes(body)
        with self._lock:
            self._uploaded[ident] = Upload(ident, label, path)
            self._uploaded.move_to_end(ident)
            while len(self._uploaded) > self.config.uploads_kept:
                _, gone = self._uploaded.popitem(last=False)
                gone.path.unlink(missing_ok=True)

    def _upload_folder(self) -> Path:
        with self._lock:
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix="apportion-studio-")
            return Path(self._folder.name)

    def _peek(self, ident: str) -> dep.Deployable | None:
        with self._lock:
            found = self._deployables.get(ident)
            return None if found is None else found[0]

    # ---- the dry run before a save -------------------------------------------------

    def dry_run(self, pool: str, raw_policy: Any) -> dryrun.DryRun:
        """``raw_policy`` tried on the pool's recent jobs and the examples
        (workers/policies/dryrun.py). A deployable already loaded is reused; the others
        are computed for the trial and not kept, so a save does not push the
        administrator's own deployables out of memory."""
        limits = self.config.limits

        def load(ident: str, label: str, source: str, job: Callable[[], Any]) -> dep.Deployable:
            found = self._peek(ident)
            if found is not None:
                return found
            return dep.load(job(), ident=ident, label=label, source=source, limits=limits)

        tried_on = dryrun.sources(
            pool,
            recent=[dryrun.recent_entry(job) for job in self._recent()],
            examples=self.config.examples,
            limits=limits,
            has_own_policy=lambda other: self.store.current(other) is not None,
            load=load,
        )
        return dryrun.dry_run(
            pool, raw_policy, tried_on, limits=limits, failures=self.config.failures
        )

    # ---- policies ------------------------------------------------------------------

    def policy_of(self, pool: str, limit: int = HISTORY_SHOWN) -> dict[str, Any]:
        """The policy ``pool``'s jobs get now, and its newest ``limit`` versions listed
        without their bodies (GET /api/policy/version fetches one)."""
        version = self.store.effective(pool)
        history = [_listed(v) for v in self.store.history(pool, limit=limit)] if pool else []
        if version is not None:
            return {"pool": pool, "current": _version(version), "history": history}
        config = self.config.config_policy
        current = None
        if config is not None:
            current = {
                "pool": DEFAULT_POOL,
                "version": 0,
                "policy": [dict(m) for m in config],
                "author": "config/default_policy.yaml",
                "comment": "the worker's configured default (no version saved yet)",
                "saved_at": None,
            }
        return {"pool": pool, "current": current, "history": history}


def _version(v: PolicyVersion) -> dict[str, Any]:
    return v.as_dict()


def _listed(v: PolicyVersion) -> dict[str, Any]:
    return {"version": v.version, "author": v.author, "comment": v.comment, "saved_at": v.saved_at}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def _constant(job: Any) -> Callable[[], Any]:
    return lambda: job


# ---- HTTP --------------------------------------------------------------------------


def _json(data: Any, status: int = 200) -> Response:
    return Response(encode(data), status, media_type="application/json")


def _problem(exc: DomainError) -> Response:
    return _json({"error": error_info(exc).as_dict()}, 422)


def _unavailable(exc: InfrastructureError) -> Response:
    """Redis (the policy store, the failure history) did not answer: say so, retryable."""
    return _json({"error": {"code": "unavailable", "message": str(exc), "details": []}}, 503)


def _rejected(path: str, message: str, status: int = 422) -> Response:
    return (
        _problem(Rejected.at(path, message))
        if status == 422
        else _json(
            {"error": {"code": "invalid_request", "message": message, "details": []}}, status
        )
    )


async def _body(request: Request, limit: int, timeout: float) -> bytes | Response:
    """The request body, or a 413 once it passes ``limit`` bytes (never read past it),
    or a 408 (and the connection closed) when it has not all come within ``timeout``
    seconds: a client trickling a body in holds a connection no longer than that."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        return _too_slow(timeout)
    return b"".join(chunks)


def _too_slow(timeout: float) -> Response:
    answer = _json(
        {
            "error": {
                "code": "invalid_request",
                "message": f"the request's body did not arrive within {timeout:g} s",
                "details": [],
            }
        },
        408,
    )
    answer.headers["connection"] = "close"
    return answer


def _too_large(limit: int) -> Response:
    return _json(
        {
            "error": {
                "code": "too_large",
                "message": f"the upload exceeds the studio's limit of {limit} bytes",
                "details": [{"path": "$", "message": f"over {limit} bytes"}],
            }
        },
        413,
    )


def _object(raw: bytes, limits: Limits) -> dict[str, Any]:
    data = parse_json_text(raw, limits)
    if not isinstance(data, dict):
        raise Rejected.at("$", "the request body must be a JSON object")
    return data


def _text(data: Mapping[str, Any], key: str, *, limit: int, required: bool = True) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise Rejected.at(key, "a non-empty string is required" if required else "must be a string")
    if len(value) > limit:
        raise Rejected.at(key, f"at most {limit} characters")
    return value


class _SecurityHeaders:
    """Adds SECURITY_HEADERS to every response (an ASGI middleware)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)


Handler = Callable[[Studio, Request, Any], Any]


def api(
    studio: Studio, handler: Handler, *, post: bool = True, raw_limit: int | None = None
) -> Callable[[Request], Any]:
    """An endpoint: the guard, the body read under a limit, errors as JSON answers.

    A POST's body is read up to ``raw_limit`` bytes (413 beyond) and handed to
    ``handler`` as bytes; without ``raw_limit``, up to MAX_REQUEST_BYTES and handed as
    a JSON object.
    """
    guard = Guard(studio.config.token, studio.config.loopback_only, studio.config.public_origin)

    async def endpoint(request: Request) -> Response:
        refused = guard.check(request)
        if refused is not None:
            return refused
        data: Any = {}
        try:
            if post:
                raw = await _body(
                    request, raw_limit or MAX_REQUEST_BYTES, studio.config.body_timeout
                )
                if isinstance(raw, Response):
                    return raw
                data = raw if raw_limit is not None else _object(raw, studio.config.limits)
            result = await run_in_threadpool(handler, studio, request, data)
        except DomainError as exc:
            return _problem(exc)
        except dryrun.RefusedByDryRun as exc:
            return _json(
                {
                    "error": {
                        "code": "dry_run_refused",
                        "message": f"{exc.message} (confirm to save it anyway)",
                        "details": [],
                    },
                    "dry_run": exc.report.as_dict(),
                },
                409,
            )
        except InfrastructureError as exc:
            return _unavailable(exc)
        return result if isinstance(result, Response) else _json(result)

    return endpoint


def state(studio: Studio, request: Request, _: Any) -> Any:
    config = studio.config
    return {
        "pools": sorted({DEFAULT_POOL, *studio.store.pools()}),
        "default_pool": DEFAULT_POOL,
        "deployables": [
            {"id": o.id, "label": o.label, "source": o.source} for o in studio.offers()
        ],
        "loaded": [{"id": u.id, "label": u.label, "source": "upload"} for u in studio.uploads()],
        "max_upload_bytes": config.max_upload_bytes,
        "max_launches": config.max_launches,
        "max_expression_length": config.limits.yaql_max_expression_length,
    }


def _pool(request: Request) -> str:
    pool = request.query_params.get("pool") or DEFAULT_POOL
    if len(pool) > MAX_POOL:
        raise Rejected.at("pool", f"at most {MAX_POOL} characters")
    return pool


def _whole(request: Request, name: str, default: int | None, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None and default is not None:
        return default
    # isascii: str.isdigit also accepts digits int() refuses ("²").
    if raw is None or not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise Rejected.at(name, f"a whole number from {low} to {high}")
    return int(raw)


def policy(studio: Studio, request: Request, _: Any) -> Any:
    limit = _whole(request, "limit", HISTORY_SHOWN, 1, MAX_HISTORY_SHOWN)
    return studio.policy_of(_pool(request), limit=limit)


def policy_version(studio: Studio, request: Request, _: Any) -> Any:
    pool = _pool(request)
    number = _whole(request, "version", None, 1, 2**62)
    found = studio.store.version(pool, number)
    if found is None:
        raise Rejected.at("version", f"pool {pool!r} keeps no version {number}")
    return _version(found)


def policy_diff(studio: Studio, request: Request, _: Any) -> Any:
    """Version N of the pool against its current version: a unified diff of their YAML."""
    pool = _pool(request)
    number = _whole(request, "version", None, 1, 2**62)
    found = studio.store.version(pool, number)
    if found is None:
        raise Rejected.at("version", f"pool {pool!r} keeps no version {number}")
    current = studio.store.current(pool)
    if current is None:  # the pool's versions were all replaced since the page loaded
        raise Rejected.at("pool", f"pool {pool!r} has no current version")
    return {"version": number, "current": current.version, "diff": diff(found, current)}


def select(studio: Studio, request: Request, data: dict[str, Any]) -> Any:
    return studio.select(_text(data, "id", limit=MAX_ID)).summary()


def _policy_sent(data: Mapping[str, Any]) -> Any:
    raw = data.get("policy")
    if raw is None:
        raise Rejected.at(
            "policy", "the studio evaluates the policy it is sent: a list of modules is required"
        )
    return raw


def evaluate(studio: Studio, request: Request, data: dict[str, Any]) -> Any:
    found = studio.deployable(_text(data, "deployable", limit=MAX_ID))
    config = studio.config
    return dep.evaluate(
        found,
        _policy_sent(data),
        limits=config.limits,
        failures=config.failures,
        expression_memo=studio.expression_memo,
    )


def simulate(studio: Studio, request: Request, data: dict[str, Any]) -> Any:
    config = studio.config
    found = studio.deployable(_text(data, "deployable", limit=MAX_ID))
    launches, seed = data.get("launches", 1000), data.get("seed", 0)
    if (
        not isinstance(launches, int)
        or isinstance(launches, bool)
        or not 1 <= launches <= config.max_launches
    ):
        raise Rejected.at("launches", f"a whole number from 1 to {config.max_launches}")
    if not isinstance(seed, int) or isinstance(seed, bool) or abs(seed) > 2**62:
        raise Rejected.at("seed", "a whole number")
    outcome = dep.evaluate(
        found,
        _policy_sent(data),
        limits=config.limits,
        failures=config.failures,
        expression_memo=studio.expression_memo,
    )
    group = outcome["groups"][0]["probabilities"]
    return {
        "launches": launches,
        "seed": seed,
        "expected": group,
        "counts": dep.simulate(group, launches, seed),
    }


def save(studio: Studio, request: Request, data: dict[str, Any]) -> Any:
    pool = _text(data, "pool", limit=MAX_POOL)
    # The store's own bounds, so that the studio refuses exactly what the store would.
    author = _text(data, "author", limit=MAX_AUTHOR)
    comment = _text(data, "comment", limit=MAX_COMMENT, required=False)
    raw = data.get("policy")
    if not isinstance(raw, list):
        raise Rejected.at("policy", "a policy is a list of modules")
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise Rejected.at("force", "true or false")
    report = studio.dry_run(pool, raw)
    if report.refuses and not force:
        raise dryrun.RefusedByDryRun(report)
    saved = studio.store.save(pool, raw, author=author, comment=comment)
    return {"saved": _version(saved), "dry_run": report.as_dict()}


def upload(studio: Studio, request: Request, body: bytes) -> Any:
    name = request.query_params.get("name", "")[:MAX_LABEL]
    return studio.upload(body, name).summary()


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


def create_app(studio: Studio) -> Starlette:
    upload_limit = studio.config.max_upload_bytes
    return Starlette(
        middleware=[Middleware(_SecurityHeaders)],
        routes=[
            Route("/", index),
            Route("/api/state", api(studio, state, post=False)),
            Route("/api/policy", api(studio, policy, post=False)),
            Route("/api/policy/version", api(studio, policy_version, post=False)),
            Route("/api/policy/diff", api(studio, policy_diff, post=False)),
            Route("/api/deployables/select", api(studio, select), methods=["POST"]),
            Route(
                "/api/deployables/upload",
                api(studio, upload, raw_limit=upload_limit),
                methods=["POST"],
            ),
            Route("/api/evaluate", api(studio, evaluate), methods=["POST"]),
            Route("/api/simulate", api(studio, simulate), methods=["POST"]),
            Route("/api/save", api(studio, save), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
    )


__all__ = ["DEFAULT_POOL", "Studio", "StudioConfig", "create_app"]
