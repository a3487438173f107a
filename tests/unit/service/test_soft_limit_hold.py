"""A soft time limit after publishing is held until the task returns (answers.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from apportion.workers.results import answers


class PoolSaysTooLate(Exception):
    pass


def _pool_handler(signum: int, frame: Any) -> None:
    raise PoolSaysTooLate


@pytest.fixture
def pool_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # As in a freshly started pool child: the pool's handler, no guard yet.
    monkeypatch.setattr(answers, "_guard_pid", 0)
    previous = signal.signal(signal.SIGUSR1, _pool_handler)
    try:
        yield
    finally:
        answers.release_soft_limit()
        signal.signal(signal.SIGUSR1, previous)


def test_a_soft_limit_raises_before_the_hold_and_after_the_release_but_not_while_held(
    pool_handler: None, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(PoolSaysTooLate):
        os.kill(os.getpid(), signal.SIGUSR1)

    for _ in range(3):  # every job of a pool child holds and releases once
        answers.hold_soft_limit()
        os.kill(os.getpid(), signal.SIGUSR1)  # ignored, logged
        answers.release_soft_limit()
        with pytest.raises(PoolSaysTooLate):
            os.kill(os.getpid(), signal.SIGUSR1)

    assert caplog.text.count("soft time limit reached while or after publishing the answer") == 3


def test_without_a_python_handler_the_hold_logs_and_the_release_puts_the_default_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(answers, "_guard_pid", 0)
    previous = signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    try:
        answers.hold_soft_limit()
        os.kill(os.getpid(), signal.SIGUSR1)  # the default would end the process
        answers.release_soft_limit()
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    finally:
        answers.release_soft_limit()
        signal.signal(signal.SIGUSR1, previous)
