"""``apportion studio``: tune a pool's launch policy live in a browser (docs/studio.md).

Serves the policy studio on 127.0.0.1:8765 by default. Any other bind address needs a
token (``--token`` or ``APPORTION_STUDIO_TOKEN``); the studio refuses to start
without one. It reads and writes the policy store in the Redis of
``APPORTION_REDIS_URL``, like the workers.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from apportion.cli.common import EXIT_OK, CommandFailed, UsageError, settings

TOKEN_ENV = "APPORTION_STUDIO_TOKEN"
PUBLIC_ORIGIN_ENV = "APPORTION_STUDIO_PUBLIC_ORIGIN"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "studio", help="serve the policy studio: tune a pool's launch policy in a browser"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (8765)")
    p.add_argument(
        "--token",
        help=f"required by every API request; needed to bind a non-loopback address "
        f"(default: ${TOKEN_ENV})",
    )
    p.add_argument(
        "--public-origin",
        metavar="URL",
        help="the URL browsers reach the studio at through a reverse proxy, e.g. "
        f"https://studio.example.com: its requests' Origin (default: ${PUBLIC_ORIGIN_ENV})",
    )
    p.add_argument(
        "--examples",
        type=Path,
        help="folder whose launch_select*.json jobs are offered (default: ./examples if present)",
    )
    p.add_argument(
        "--max-upload-bytes",
        type=int,
        help="largest job the page may upload (default: $APPORTION_STUDIO_MAX_UPLOAD_BYTES, 8 MiB)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from apportion.workers.studio.serve import build_studio, serve
    except ImportError as exc:
        raise CommandFailed(
            f"the studio needs its web server ({exc.name} is missing): "
            "pip install 'apportion[studio]' (scripts/bootstrap installs it)"
        ) from None
    token = args.token or os.environ.get(TOKEN_ENV) or None
    examples = args.examples
    if examples is None and Path("examples").is_dir():
        examples = Path("examples")
    elif examples is not None and not examples.is_dir():
        raise UsageError(f"--examples {examples} is not a directory")
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port")
    if args.max_upload_bytes is not None and args.max_upload_bytes < 1:
        raise UsageError("--max-upload-bytes must be positive")
    config = settings()
    try:
        studio = build_studio(
            config,
            host=args.host,
            token=token,
            examples=examples,
            max_upload_bytes=args.max_upload_bytes,
            public_origin=args.public_origin or os.environ.get(PUBLIC_ORIGIN_ENV) or None,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(f"apportion studio on http://{where}:{args.port}/", flush=True)
    serve(studio, args.host, args.port, header_timeout=config.studio_header_timeout)
    return EXIT_OK
