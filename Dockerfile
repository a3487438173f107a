FROM python:3.11-slim
WORKDIR /app
# Dependencies first, pinned by the lock (a layer that changes only when the lock does).
COPY requirements/runtime.lock ./requirements/runtime.lock
RUN pip install --no-cache-dir -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY src ./src
COPY config ./config
COPY workers ./workers
COPY tasks ./tasks
RUN pip install --no-cache-dir --no-deps .
# Run as an unprivileged user: a worker never needs root.
RUN useradd --create-home apportion
USER apportion
CMD ["celery", "-A", "apportion.workers.app", "worker", "-Q", "attach,launch,partition,events"]
