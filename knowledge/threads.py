"""Run OpenMP work (torch on the CPU, llama.cpp measurements) on a thread that ends with it.

Why: llama.cpp's CPU kernels and torch share one libgomp in this process. A thread that ran an
OpenMP parallel region keeps an idle OpenMP team for as long as the thread lives, and with more
OpenMP threads alive than CPUs libgomp stops spinning at barriers and sleeps instead. Every decode
on the engine's thread then pays a futex round trip per graph node: measured on 2 cores, one user's
decode step went from 7.1 ms to 12-14 ms after a single torch embedding on a request thread, and to
13-18 ms after a ceiling measurement on the main thread, for the rest of the process. A thread that
ends frees its team. ONNX Runtime keeps its own thread pool and is not affected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def on_own_thread(fn: Callable[[], T], name: str = "openmp-work") -> T:
    """`fn()` on a new thread, joined; its result returned or its exception raised here."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(e)

    worker = threading.Thread(target=run, name=name)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]
