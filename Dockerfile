FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY config ./config
COPY workers ./workers
COPY tasks ./tasks
RUN pip install --no-cache-dir '.[flower]'
# Run as an unprivileged user: a worker never needs root.
RUN useradd --create-home apportion
USER apportion
CMD ["celery", "-A", "apportion.workers.app", "worker", "-Q", "attach,launch,partition,events"]
