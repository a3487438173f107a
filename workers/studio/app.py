"""The studio's web server: one page, its static files, and a small JSON API.

Starlette routes, every API call through :class:`~.guard.Guard` (token, Host, same
origin). Endpoints (all JSON; errors as ``{"error": {code, message, details}}`` with
``details`` naming each field, as a rejected envelope does):

* ``GET  /api/state`` — pools, deployables on offer, limits;
* ``GET  /api/policy?pool=P`` — the policy the pool's jobs get now, and its history;
* ``POST /api/deployables/select`` ``{"id"}`` — compute an offered job's candidates;
* ``POST /api/deployables/upload`` (the job as the body) — validate and compute;
* ``POST /api/evaluate`` ``{"deployable", "policy"}`` — groups, trace, no-chance list;
* ``POST /api/simulate`` ``{"deployable", "policy", "launches", "seed"}``;
* ``POST /api/save`` ``{"pool", "policy", "author", "comment"}`` — a new version.
"""

from __future__ import annotations

import hashlib
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
from apportion.workers.policies.store import PolicyStore, PolicyVersion
from apportion.workers.studio import deployable as dep
from apportion.workers.studio.guard import Guard

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


@dataclass(frozen=True)
class Offer:
    """A deployable the page can pick, not computed until it is picked."""

    id: str
    label: str
    source: str
    load: Callable[[], Any]  # the job, as JSON data


@dataclass
class StudioConfig:
    limits: Limits
    token: str | None = None
    loopback_only: bool = True
    examples: Path | None = None
    # The config file's default policy: shown for a pool when the store has none at all.
    config_policy: Sequence[Mapping[str, Any]] | None = None
    max_upload_bytes: int = 8 * 1024 * 1024
    max_deployables: int = 8
    max_launches: int = 10_000
    # Each recent launch_select job, as JSON data, newest first (workers/studio/recent.py).
    recent_jobs: Callable[[], list[Any]] | None = None
    failures: dep.FailureCounts | None = None


@dataclass
class Studio:
    config: StudioConfig
    store: PolicyStore
    _deployables: OrderedDict[str, dep.Deployable] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Expression modules' values while what they read is unchanged (a slider moves).
    expression_memo: ExpressionMemo = field(default_factory=lambda: ExpressionMemo(16))

    # ---- deployables ---------------------------------------------------------------

    def offers(self) -> list[Offer]:
        out: list[Offer] = []
        folder = self.config.examples
        if folder is not None and folder.is_dir():
            for path in sorted(folder.glob("launch_select*.json")):
                if path.name.endswith(".envelope.json"):
                    continue
                out.append(
                    Offer(
                        f"example:{path.name}",
                        f"examples/{path.name}",
                        "example",
                        _reader(path, self.config.limits),
                    )
                )
        if self.config.recent_jobs is not None:
            for job in self.config.recent_jobs():
                digest = _digest(encode(job))
                job_id = job.get("job_id") if isinstance(job, dict) else None
                label = f"recent: {job_id or digest[:12]}"
                out.append(Offer(f"recent:{digest}", label, "recent", _constant(job)))
        return out

    def deployable(self, ident: str) -> dep.Deployable:
        with self._lock:
            found = self._deployables.get(ident)
            if found is not None:
                self._deployables.move_to_end(ident)
                return found
        raise Rejected.at("deployable", f"no deployable {ident!r} is loaded; pick one again")

    def select(self, ident: str) -> dep.Deployable:
        with self._lock:
            if ident in self._deployables:
                return self._deployables[ident]
        offer = next((o for o in self.offers() if o.id == ident), None)
        if offer is None:
            raise Rejected.at("id", f"no deployable {ident!r} is on offer")
        return self._keep(
            dep.load(
                offer.load(),
                ident=offer.id,
                label=offer.label,
                source=offer.source,
                limits=self.config.limits,
            )
        )

    def upload(self, body: bytes, name: str) -> dep.Deployable:
        payload = parse_json_text(body, self.config.limits)
        ident = f"upload:{_digest(body)}"
        label = f"uploaded: {name or ident[7:19]}"
        return self._keep(
            dep.load(payload, ident=ident, label=label, source="upload", limits=self.config.limits)
        )

    def uploads(self) -> list[dep.Deployable]:
        with self._lock:
            return [d for d in self._deployables.values() if d.source == "upload"]

    def _keep(self, deployable: dep.Deployable) -> dep.Deployable:
        with self._lock:
            self._deployables[deployable.id] = deployable
            self._deployables.move_to_end(deployable.id)
            while len(self._deployables) > self.config.max_deployables:
                self._deployables.popitem(last=False)
        return deployable

    # ---- policies ------------------------------------------------------------------

    def policy_of(self, pool: str) -> dict[str, Any]:
        version = self.store.effective(pool)
        history = [_version(v) for v in self.store.history(pool)] if pool else []
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


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def _constant(job: Any) -> Callable[[], Any]:
    return lambda: job


def _reader(path: Path, limits: Limits) -> Callable[[], Any]:
    def read() -> Any:
        return parse_json_text(path.read_bytes(), limits)

    return read


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


async def _body(request: Request, limit: int) -> bytes | Response:
    """The request body, or a 413 once it passes ``limit`` bytes (never read past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


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


def create_app(studio: Studio) -> Starlette:
    config = studio.config
    guard = Guard(config.token, config.loopback_only)
    # A policy request is small: the modules and an expression of bounded length.
    small = 1024 * 1024

    def api(
        handler: Callable[[Request, dict[str, Any]], Any], *, post: bool = True
    ) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            refused = guard.check(request)
            if refused is not None:
                return refused
            data: dict[str, Any] = {}
            try:
                if post:
                    raw = await _body(request, small)
                    if isinstance(raw, Response):
                        return raw
                    data = _object(raw, config.limits)
                result = await run_in_threadpool(handler, request, data)
            except DomainError as exc:
                return _problem(exc)
            except InfrastructureError as exc:
                return _unavailable(exc)
            return result if isinstance(result, Response) else _json(result)

        return endpoint

    def state(request: Request, _: dict[str, Any]) -> Any:
        pools = sorted({DEFAULT_POOL, *studio.store.pools()})
        return {
            "pools": pools,
            "default_pool": DEFAULT_POOL,
            "deployables": [
                {"id": o.id, "label": o.label, "source": o.source} for o in studio.offers()
            ],
            "loaded": [
                {"id": d.id, "label": d.label, "source": d.source} for d in studio.uploads()
            ],
            "max_upload_bytes": config.max_upload_bytes,
            "max_launches": config.max_launches,
            "max_expression_length": config.limits.yaql_max_expression_length,
        }

    def policy(request: Request, _: dict[str, Any]) -> Any:
        pool = request.query_params.get("pool") or DEFAULT_POOL
        if len(pool) > 200:
            raise Rejected.at("pool", "at most 200 characters")
        return studio.policy_of(pool)

    def select(request: Request, data: dict[str, Any]) -> Any:
        return studio.select(_text(data, "id", limit=400)).summary()

    def evaluate(request: Request, data: dict[str, Any]) -> Any:
        found = studio.deployable(_text(data, "deployable", limit=400))
        return dep.evaluate(
            found,
            data.get("policy"),
            limits=config.limits,
            failures=config.failures,
            expression_memo=studio.expression_memo,
        )

    def simulate(request: Request, data: dict[str, Any]) -> Any:
        found = studio.deployable(_text(data, "deployable", limit=400))
        launches, seed = data.get("launches", 1000), data.get("seed", 0)
        if not isinstance(launches, int) or not 1 <= launches <= config.max_launches:
            raise Rejected.at("launches", f"a whole number from 1 to {config.max_launches}")
        if not isinstance(seed, int) or isinstance(seed, bool) or abs(seed) > 2**62:
            raise Rejected.at("seed", "a whole number")
        outcome = dep.evaluate(
            found,
            data.get("policy"),
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

    def save(request: Request, data: dict[str, Any]) -> Any:
        pool = _text(data, "pool", limit=200)
        author = _text(data, "author", limit=200)
        comment = _text(data, "comment", limit=2000, required=False)
        raw = data.get("policy")
        if not isinstance(raw, list):
            raise Rejected.at("policy", "a policy is a list of modules")
        saved = studio.store.save(pool, raw, author=author, comment=comment)
        return {"saved": _version(saved)}

    async def upload(request: Request) -> Response:
        refused = guard.check(request)
        if refused is not None:
            return refused
        raw = await _body(request, config.max_upload_bytes)
        if isinstance(raw, Response):
            return raw
        name = request.query_params.get("name", "")[:200]
        try:
            found = await run_in_threadpool(studio.upload, raw, name)
        except DomainError as exc:
            return _problem(exc)
        except InfrastructureError as exc:
            return _unavailable(exc)
        return _json(found.summary())

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app = Starlette(
        middleware=[Middleware(_SecurityHeaders)],
        routes=[
            Route("/", index),
            Route("/api/state", api(state, post=False)),
            Route("/api/policy", api(policy, post=False)),
            Route("/api/deployables/select", api(select), methods=["POST"]),
            Route("/api/deployables/upload", upload, methods=["POST"]),
            Route("/api/evaluate", api(evaluate), methods=["POST"]),
            Route("/api/simulate", api(simulate), methods=["POST"]),
            Route("/api/save", api(save), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
    )

    return app


__all__ = ["DEFAULT_POOL", "Studio", "StudioConfig", "create_app"]
