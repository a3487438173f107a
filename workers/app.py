"""The Celery application: ``celery -A apportion.workers.app worker -Q QUEUES``."""

from __future__ import annotations

import gc
import logging
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown
from celery.utils.imports import symbol_by_name

from apportion.config.celeryconfig import broker_transport, celery_config
from apportion.config.settings import Settings, get_settings

# Imported for their signal handlers: the job log line, metrics and Flower's preview
# (observe), one log line per job and JSON logs (logs).
from apportion.workers import logs, observe  # noqa: F401
from apportion.workers.metrics import jobs as job_metrics
from apportion.workers.redis import reachability

log = logging.getLogger("apportion.workers")

# The job tasks stand above the service: they are thin adapters over its runtime,
# publisher and stores. So the app names the module that registers them, as Celery
# names a task module (``include``) or a Request class, rather than importing it: no
# module of apportion.workers imports apportion.tasks (tests/unit/test_layers.py).
TASKS = "apportion.tasks:register"
EVENTS = "apportion.workers.heartbeat:Events"


def create_app(
    settings: Settings | None = None, *, broker: str | None = None, backend: str | None = None
) -> Celery:
    """A configured app with every available task registered on it.

    ``broker``/``backend`` override the settings (the embedded demo runs on
    ``memory://``); everything else — serializers, acks, limits, routes — is the
    production configuration.
    """
    register = symbol_by_name(TASKS)
    settings = settings or get_settings()
    # Worker events published once each, none into a partition (workers/heartbeat.py).
    celery = Celery("apportion", set_as_current=False, events=EVENTS)
    conf = celery_config(settings)
    if broker:
        conf["broker_url"] = broker
        # The transport follows the URL: left at the Redis transport, a memory:// app
        # (the embedded demo) would quietly use the Redis on localhost:6379.
        conf["broker_transport"] = broker_transport(broker)
    if backend:
        conf["result_backend"] = backend
    celery.config_from_object(conf)
    register(celery, settings)
    return celery


def warm_up(settings: Settings) -> None:
    """Import every engine, build yaql's parser and load the default policy, once.

    Engines are imported lazily (``apportion --help`` must not load scipy), so without
    this every fresh pool child paid ~1-3 s (scipy, yaql's parser tables) inside its
    first job, under that job's soft time limit: on a loaded machine, or with short
    limits, the first partition job of a child could be answered ``time_limit``. Done
    in the worker's main process before the pool forks, the children inherit it all,
    and a broken default policy stops the worker at boot instead of failing jobs.
    """
    from apportion import kinds
    from apportion.engine_settings import load_default_policy
    from apportion.workers.launch.launcher import make_launcher
    from apportion.yaql_eval import warm_up as warm_up_yaql

    for kind in kinds.REGISTRY.values():
        kind.load_solver()
    make_launcher(settings)  # an unknown APPORTION_LAUNCHER stops the worker at boot
    warm_up_yaql(settings.limits)
    load_default_policy(settings.default_policy_file)


def require_gate(celery: Celery) -> None:
    """Refuse to run jobs from a broker whose transport has no gate in front of the pool.

    Tasks trust what the gate writes into a message (the ``apportion_rejected``
    verdict, bounded headers): on an ungated transport any producer could set them. The
    settings accept only schemes with a gated transport (config/celeryconfig.py); this
    catches an app whose broker was configured around them. ``memory://`` is the
    embedded demo's in-process broker, whose only producer is the demo itself.
    """
    from apportion.workers.broker.transport import Transport

    url = str(celery.conf.broker_url or "")
    if url.startswith("memory://"):
        return
    transport = celery.connection_for_read().get_transport_cls()
    gate = celery.conf.broker_transport_options.get("apportion_gate")
    if not (isinstance(transport, type) and issubclass(transport, Transport)) or gate is None:
        raise RuntimeError(
            f"refusing to start: the broker transport {transport!r} does not pass jobs "
            "through apportion's gate; use a redis://, rediss:// or sentinel:// broker URL"
        )


def allow_tasks(celery: Celery) -> None:
    """Tell the transport's gate which task names this worker runs (the others are
    dead-lettered, never handed to Celery; Celery's own built-in tasks are not for
    producers to send)."""
    options = celery.conf.broker_transport_options.get("apportion_gate")
    if options is not None:
        options["tasks"] = {
            name: [task.time_limit, task.soft_time_limit]
            for name, task in sorted(celery.tasks.items())
            if not name.startswith("celery.")
        }


_metrics_dir: str | None = None


def _warm_up_before_the_pool_forks(sender: Any = None, **_: Any) -> None:
    # worker_init fires in the main process before the pool starts (celery.worker.worker)
    # and before the consumer opens its broker connection. Celery logs and swallows an
    # exception raised by a signal handler, and the worker would then start without
    # what this refuses to start without (the gate, a known launcher, a default policy
    # the store takes); a SystemExit is not swallowed. Redis being away is not among
    # them: the seed logs it and the worker starts.
    try:
        _warm_up(sender)
    except Exception as exc:
        job_metrics.stop(_metrics_dir)  # worker_shutdown never fires for this worker
        log.critical("apportion worker: %s", exc)
        raise SystemExit(f"apportion worker: {exc}") from exc


def _warm_up(sender: Any) -> None:
    global _metrics_dir
    if sender is not None and getattr(sender, "app", None) is not None:
        require_gate(sender.app)
        allow_tasks(sender.app)
    settings = get_settings()
    if settings.reply_timeout < settings.redis_socket_timeout:
        log.info(
            "Redis replies are waited for %g s, half the shortest soft time limit, not "
            "APPORTION_REDIS_SOCKET_TIMEOUT=%g s (a wait on Redis must end before a limit)",
            settings.reply_timeout,
            settings.redis_socket_timeout,
        )
    if settings.metrics_port is not None:
        # Before the fork, so every pool process records into the multiprocess files.
        _metrics_dir = job_metrics.start(settings.metrics_port, settings.metrics_address)
    warm_up(settings)
    # The main process seeds once before the pool starts; children read the store per job.
    from apportion.workers.policies.seed import seed_default_policy

    seed_default_policy(settings)
    # Everything loaded so far lives as long as the process. Frozen, the pool children
    # skip it in every full garbage collection (scipy, pydantic's schemas and yaql's
    # tables are hundreds of thousands of objects), and the collector no longer writes
    # to those pages, so the children keep sharing them with the parent after fork.
    gc.collect()
    gc.freeze()


def _watch_redis(sender: Any = None, **_: Any) -> None:
    # After the pool has forked (worker_ready): the watch is a thread, and a thread
    # alive at fork time could hold a lock a pool child then waits on for ever.
    reachability.watch(reachability.for_broker(get_settings()))


def _stop(sender: Any = None, **_: Any) -> None:
    reachability.watch(None)
    job_metrics.stop(_metrics_dir)


worker_init.connect(_warm_up_before_the_pool_forks, weak=False)
worker_ready.connect(_watch_redis, weak=False)
worker_shutdown.connect(_stop, weak=False)


app = create_app()
