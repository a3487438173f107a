"""Real processes for the integration suite: a redis-server and Celery workers.

Nothing here is mocked: the tests start a dedicated redis-server on a free port
(so they never touch an operator's data) and real ``celery worker`` processes
against it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(predicate: object, timeout: float, interval: float = 0.05, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")


@dataclass
class RedisServer:
    """A redis-server; ``password`` (with ``username``: an ACL user) guards it, and
    ``extra_args`` are further ``--option value`` pairs (TLS, replication)."""

    port: int
    workdir: Path
    appendonly: bool = False
    proc: subprocess.Popen[bytes] | None = None
    password: str | None = None
    username: str | None = None
    extra_args: tuple[str, ...] = ()
    # TLS only, on ``port``: the server's certificate and key, and the CA that signed it.
    tls: tuple[Path, Path, Path] | None = None

    @property
    def url(self) -> str:
        auth = f"{self.username or ''}:{self.password}@" if self.password else ""
        if self.tls is not None:
            query = f"ssl_cert_reqs=required&ssl_ca_certs={self.tls[2]}"
            return f"rediss://{auth}127.0.0.1:{self.port}/0?{query}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        tls: dict[str, Any] = {}
        if self.tls is not None:
            tls = {"ssl": True, "ssl_ca_certs": str(self.tls[2]), "ssl_cert_reqs": "required"}
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=self.username,
            password=self.password,
            socket_timeout=5,
            **tls,
        )

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--logfile",
            str(self.workdir / "redis.log"),
        ]
        if self.password and self.username:
            args += ["--user", self.username, "on", f">{self.password}", "~*", "&*", "+@all"]
            args += ["--user", "default", "off"]
        elif self.password:
            args += ["--requirepass", self.password]
        if self.tls is not None:
            cert, key, ca = self.tls
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert)]
            args += ["--tls-key-file", str(key), "--tls-ca-cert-file", str(ca)]
            args += ["--tls-auth-clients", "no"]
        args += self.extra_args
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up() -> bool:
            try:
                with self.client() as client:
                    return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(up, 10, what=f"redis-server on {self.port}")

    def stop(self) -> None:
        """SIGTERM: Redis writes its append-only file out and exits (a clean shutdown)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self, down_for: float = 0.0) -> None:
        """Stop and start again on the same port and directory (data kept with appendonly)."""
        self.stop()
        time.sleep(down_for)
        self.start()


@dataclass
class SentinelCluster:
    """One primary, two replicas and three sentinels (``redis-server CONF --sentinel``),
    all on free ports in ``workdir``; quick to fail over (down after 2 s: with 1 s, a
    loaded machine made sentinels take the just promoted replica for dead too, and fail
    over a second time).

    Started means replicated: both replicas have finished their first sync, not only
    been seen by the sentinels. Redis delays a diskless first sync by 5 s to gather
    replicas, and a primary killed inside that window takes everything written so far
    with it: asynchronous replication's loss, not a failover's, which the tests measure.

    ``password`` guards the primary and replicas (the sentinels reach them with it),
    ``sentinel_password`` the sentinels themselves.
    """

    workdir: Path
    master: str = "apportion"
    password: str | None = None
    sentinel_password: str | None = None
    servers: list[RedisServer] = field(default_factory=list)
    sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sentinel_ports: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The Sentinel URL apportion is configured with (the master's password in it)."""
        auth = f":{self.password}@" if self.password else ""
        return ";".join(f"sentinel://{auth}127.0.0.1:{p}/0" for p in self.sentinel_ports)

    def start(self) -> None:
        auth: tuple[str, ...] = ("--masterauth", self.password) if self.password else ()
        primary = RedisServer(
            free_port(), self.workdir / "primary", password=self.password, extra_args=auth
        )
        primary.start()
        self.servers.append(primary)
        for i in range(2):
            replica = RedisServer(
                free_port(),
                self.workdir / f"replica{i}",
                password=self.password,
                extra_args=(*auth, "--replicaof", "127.0.0.1", str(primary.port)),
            )
            replica.start()
            self.servers.append(replica)
        binary = shutil.which("redis-server")
        assert binary is not None
        for i in range(3):
            port = free_port()
            folder = self.workdir / f"sentinel{i}"
            folder.mkdir(parents=True)
            conf = folder / "sentinel.conf"
            lines = [
                f"port {port}",
                "bind 127.0.0.1",
                f"dir {folder}",
                f"logfile {folder / 'sentinel.log'}",
                f"sentinel monitor {self.master} 127.0.0.1 {primary.port} 2",
                f"sentinel down-after-milliseconds {self.master} 2000",
                f"sentinel failover-timeout {self.master} 3000",
                f"sentinel parallel-syncs {self.master} 2",
            ]
            if self.password:
                lines.append(f"sentinel auth-pass {self.master} {self.password}")
            if self.sentinel_password:
                lines += [
                    f"requirepass {self.sentinel_password}",
                    f"sentinel sentinel-pass {self.sentinel_password}",
                ]
            conf.write_text("\n".join(lines) + "\n")
            self.sentinels.append(
                subprocess.Popen(
                    [binary, str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            self.sentinel_ports.append(port)
        wait_until(self._ready, 30, interval=0.2, what="2 replicas in sync, watched by 3 sentinels")

    def _sentinel_view(self, port: int) -> dict[str, Any]:
        with redis.Redis(
            host="127.0.0.1", port=port, password=self.sentinel_password, socket_timeout=2
        ) as client:
            found: dict[str, Any] = client.sentinel_master(self.master)
            return found

    def _ready(self) -> bool:
        try:
            views = [self._sentinel_view(p) for p in self.sentinel_ports]
            watched = all(
                int(v["num-slaves"]) == 2 and int(v["num-other-sentinels"]) == 2 for v in views
            )
            return watched and all(self._synced(replica) for replica in self.servers[1:])
        except (redis.RedisError, OSError):
            return False

    @staticmethod
    def _synced(replica: RedisServer) -> bool:
        with replica.client() as client:
            info = client.info("replication")
            in_sync = info.get("master_link_status") == "up"
            return in_sync and not info.get("master_sync_in_progress")

    def primary_port(self) -> int:
        """The master's port as the first sentinel that answers sees it."""
        for port in self.sentinel_ports:
            try:
                return int(self._sentinel_view(port)["port"])
            except (redis.RedisError, OSError):
                continue
        raise RuntimeError("no sentinel answered")

    def primary(self) -> RedisServer:
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        for server in self.servers:
            server.stop()


@dataclass
class Worker:
    """A ``celery -A apportion.workers.app worker`` process in its own process group.

    ``start()`` again after ``kill()`` or ``stop()`` restarts it (same arguments, same log).
    """

    env: Mapping[str, str]
    queues: str = "attach,launch,partition,events"
    concurrency: int = 2
    logfile: Path = field(default_factory=lambda: Path("worker.log"))
    extra_args: tuple[str, ...] = ()
    app_module: str = "apportion.workers.app"
    proc: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout: float = 60) -> None:
        args = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            self.app_module,
            "worker",
            "-Q",
            self.queues,
            "-c",
            str(self.concurrency),
            "--pool",
            "prefork",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            "-n",
            f"test-{os.getpid()}-{time.monotonic_ns()}@%h",
            *self.extra_args,
        ]
        self._log = open(self.logfile, "ab")  # noqa: SIM115 - lives as long as the worker
        # A restarted worker appends to the same log: look for *its* "ready" line only.
        self._log_offset = self.logfile.stat().st_size
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            env={**os.environ, **self.env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc = self.proc

        def ready_or_exited() -> bool:
            return b" ready." in self.logfile.read_bytes()[self._log_offset :] or (
                proc.poll() is not None
            )

        wait_until(ready_or_exited, ready_timeout, what="celery worker ready")
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited at start:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.logfile.read_bytes().decode(errors="replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group: main process and pool children, no goodbye."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._close_log()

    def pause(self) -> None:
        """SIGSTOP the group: the worker holds its connections but does nothing."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def pids(self) -> list[int]:
        """The main process and every process in its group (pool children, yaql children)."""
        if self.proc is None:
            return []
        return group_pids(self.proc.pid)

    def pool_pids(self) -> list[int]:
        """The main process and its pool children (not the short-lived yaql children)."""
        if self.proc is None:
            return []
        main = self.proc.pid
        return [pid for pid in self.pids() if pid == main or parent_pid(pid) == main]

    def rss_bytes(self) -> int:
        """Resident set size of the main process plus its pool children, from /proc.

        Pages the forked children share with the main process count once per process.
        """
        return sum(rss_bytes(pid) for pid in self.pool_pids())

    def pss_bytes(self) -> int:
        """Proportional set size of the same: shared pages divided among their sharers."""
        return sum(pss_bytes(pid) for pid in self.pool_pids())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if getattr(self, "_log", None):
            self._log.close()


def group_pids(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid`` (the leader first), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited while we looked
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return sorted(out, key=lambda pid: pid != pgid)


def parent_pid(pid: int) -> int:
    """The parent of ``pid`` (0 if it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _proc_kib(path: str, field: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except OSError:  # the process is gone
        pass
    return 0


def rss_bytes(pid: int) -> int:
    """VmRSS of one process (0 if it is gone)."""
    return _proc_kib(f"/proc/{pid}/status", "VmRSS:")


def pss_bytes(pid: int) -> int:
    """Pss of one process from smaps_rollup (0 if it is gone)."""
    return _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


@contextlib.contextmanager
def running_worker(env: Mapping[str, str], logfile: Path, **kwargs: object) -> Iterator[Worker]:
    worker = Worker(env=env, logfile=logfile, **kwargs)  # type: ignore[arg-type]
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def clean_checkout(target: Path) -> None:
    """Copy into ``target`` what ``git clone`` would give: tracked files and new ones not
    yet committed, nothing ignored (no .venv, no node_modules, no var/)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO / name.decode()
        if source.is_file():
            (target / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name.decode())


def probe(code: str, *args: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter with ``args`` as its argv: the last line it
    wrote to stderr (where a probe reports, away from what the code under test prints)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return done.stderr.strip().splitlines()[-1]
