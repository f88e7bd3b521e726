"""builder.promote.pool: nested parallel calls never deadlock (a task no worker has started runs in
the caller), results keep their order, errors wait for the other tasks."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from builder.promote.pool import POOL_WORKERS, Once, Task, map_parallel, parallel, wait_all


def test_nested_map_deeper_than_the_pool_does_not_deadlock() -> None:
    def level(n: int) -> int:
        if n == 0:
            time.sleep(0.001)
            return 1
        return sum(map_parallel(level, [n - 1] * 4))

    # 4**4 = 256 leaves, 85 nested calls each waiting on its children: more than the pool's workers
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(level(4)), daemon=True)
    t.start()
    t.join(timeout=30)
    assert done == [256]
    assert POOL_WORKERS < 85


def test_map_keeps_order_and_task_runs_inline_when_not_started() -> None:
    assert map_parallel(lambda a: a * 2, [1, 2, 3]) == [2, 4, 6]
    assert map_parallel(str, []) == []
    assert parallel([lambda: 1, lambda: "two"]) == [1, "two"]
    assert Task(functools.partial(sum, [1, 2])).result() == 3


def test_error_raised_after_every_task_finished() -> None:
    finished: list[int] = []

    def job(i: int) -> int:
        if i == 0:
            raise ValueError("first")
        time.sleep(0.05)
        finished.append(i)
        return i

    with pytest.raises(ValueError, match="first"):
        map_parallel(job, [0, 1, 2])
    # started tasks completed before the error left map_parallel (queued ones were cancelled instead)
    time.sleep(0.01)
    snapshot = list(finished)
    time.sleep(0.1)
    assert finished == snapshot

    def late(i: int) -> int:
        if i == 2:
            raise KeyError("late")
        time.sleep(0.02)
        finished.append(10 + i)
        return i

    with pytest.raises(KeyError):
        wait_all([Task(functools.partial(late, i)) for i in range(3)])
    assert {10, 11} <= set(finished)


def test_once_runs_each_key_once_for_threads_asking_together() -> None:
    """Eight threads ask for one key while its first computation is still running: one call, one
    result for all; another key is computed on its own."""
    once: Once[str, int] = Once()
    calls: list[str] = []
    started, release = threading.Event(), threading.Event()

    def make() -> int:
        calls.append("a")
        started.set()
        release.wait(10)
        return 42

    got: list[int] = []
    first = threading.Thread(target=lambda: got.append(once.get("a", make)))
    first.start()
    started.wait(10)
    others = [threading.Thread(target=lambda: got.append(once.get("a", make))) for _ in range(7)]
    for t in others:
        t.start()
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert got == [42] * 8 and calls == ["a"]
    assert once.get("b", lambda: 7) == 7


def test_once_gives_every_asker_the_first_computation_error() -> None:
    once: Once[str, int] = Once()

    def fail() -> int:
        raise ValueError("listing refused")

    with pytest.raises(ValueError, match="listing refused"):
        once.get("k", fail)
    with pytest.raises(ValueError, match="listing refused"):
        once.get("k", lambda: 1)  # not computed again: the same answer as the first asker got
