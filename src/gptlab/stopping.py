"""Prompt stops on SIGINT and SIGTERM, for every phase of every command.

Outside training a signal interrupts at once: `raise_on_signals()` (the CLI installs it
around each command) turns SIGINT and SIGTERM alike into `Interrupted`, a KeyboardInterrupt
that knows its signal, so an evaluation, a scoring, a probe or an export stops between two
of Python's bytecodes and the command exits 128 + the signal's number (130, 143). Every
write is atomic (gptlab.files.atomic): what was saved stays.

Training defers it instead: inside `deferred(event)` the first signal only sets `event` (the
trainer checkpoints and stops at its next step, or between two evaluation batches) and is
remembered; a second one raises at once. `check()` raises the remembered signal: a long
loop that is no training step (the whole-val scoring after the last step) calls it between
batches, so a signal deferred for the trainer does not wait for the loop to end.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM: exit_code is the shell's 128 + its number."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


def exit_code(signum: int | None) -> int:
    """A command's exit code after `signum` stopped it (a Ctrl-C when None: 130)."""
    return 128 + (signal.SIGINT if signum is None else signum)


_pending: int | None = None  # the signal a deferred() scope took and has not raised


def check() -> None:
    """Raise Interrupted if a signal arrived inside a deferred() scope (else nothing)."""
    if _pending is not None:
        raise Interrupted(_pending)


@contextmanager
def raise_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise Interrupted (in the main thread; elsewhere a no-op). A
    signal ignored when the process started stays ignored, as Python keeps an ignored
    SIGINT (a shell's background job, nohup)."""

    def handler(signum, frame):
        raise Interrupted(signum)

    with _handlers(handler, keep_ignored=True):
        yield


class Deferred:
    """What a deferred() scope saw: `signum`, the first signal (None if none came)."""

    signum: int | None = None


@contextmanager
def deferred(on_signal: Callable[[], None]) -> Iterator[Deferred]:
    """The first SIGINT or SIGTERM calls on_signal and is kept for check() and the
    scope's Deferred; a second one raises Interrupted at once. Outside the main thread
    (the lab trains in a thread of its own) no handler is installed."""
    global _pending
    seen = Deferred()

    def handler(signum, frame):
        global _pending
        if seen.signum is not None:
            raise Interrupted(signum)
        seen.signum = _pending = signum
        on_signal()

    outer = _pending
    try:
        with _handlers(handler):
            yield seen
    finally:
        _pending = outer


@contextmanager
def _handlers(handler, keep_ignored: bool = False) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [sig for sig in SIGNALS
              if not (keep_ignored and signal.getsignal(sig) is signal.SIG_IGN)]
    previous = {sig: signal.signal(sig, handler) for sig in wanted}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
