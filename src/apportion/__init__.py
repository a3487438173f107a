"""apportion: the allocation engine.

Pure functions over pydantic models: no Celery, Redis or kombu here, so every
engine can be called directly, tested without a broker and benchmarked alone.
"""

__version__ = "0.1.0"
ENGINE_VERSION = __version__

__all__ = ["ENGINE_VERSION", "__version__"]
