"""The Celery application: ``celery -A workers.app worker -Q attach,launch,partition,events``."""

from __future__ import annotations

from celery import Celery

from config.celeryconfig import celery_config
from config.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None, *, broker: str | None = None, backend: str | None = None
) -> Celery:
    """A configured app with every available task registered on it.

    ``broker``/``backend`` override the settings (the embedded demo runs on
    ``memory://``); everything else — serializers, acks, limits, routes — is the
    production configuration.
    """
    from tasks import register

    settings = settings or get_settings()
    celery = Celery("apportion", set_as_current=False)
    conf = celery_config(settings)
    if broker:
        conf["broker_url"] = broker
    if backend:
        conf["result_backend"] = backend
    celery.config_from_object(conf)
    register(celery)
    return celery


app = create_app()
