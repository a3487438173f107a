"""The service around the engine, installed as ``apportion.workers``.

One folder per concern: ``broker/`` (the Redis transport), ``results/`` (result events,
streams, the events CLI), ``history/`` (the failure-history store), ``launch/``
(launcher hooks), ``redis/`` (connections and key names), ``demo/`` (the embedded demo).
``app.py`` is the Celery application; ``runtime.py`` the seam tasks get their
publisher and stores from.
"""
