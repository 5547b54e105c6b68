"""One request's jobs seen from the event loop: the scheduler thread's events collected,
handed over in batches, and the jobs cancelled when the client goes away.

Why batches: the scheduler emits an event per token per choice, and waking the event loop
costs a system call and a GIL handover each time; with 32 streams that was most of a step.
So an emitted event is only appended to its Run's inbox (a deque, safe between threads)
and the Run is marked; one `Notifier` per event loop wakes the loop once for every Run
marked since its last wake (one call_soon_threadsafe however many events), and each Run
then takes all its events at once (`batches`), so a stream writes once per wake.

Whether the client is still there is asked once per batch and every POLL_S while none
come (Request.is_disconnected), so a stream whose reader closed its connection frees its
rows at the scheduler's next step, whether or not the server is sending at that moment.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from gptlab.serve.scheduler import Event, Failed, Finished, Job

POLL_S = 0.25


class ClientGone(Exception):
    """The client closed its connection: the jobs are cancelled."""


class Notifier:
    """Wakes the Runs of one event loop that received events, one loop wake-up at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._marked: set[Run] = set()
        self._scheduled = False

    def mark(self, run: Run) -> None:
        """(scheduler thread) run has new events."""
        with self._lock:
            self._marked.add(run)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: the server is stopping
            pass

    def _wake(self) -> None:
        with self._lock:
            runs, self._marked, self._scheduled = self._marked, set(), False
        for run in runs:
            run.ready.set()


class Run:
    """The jobs of one request (one per prompt), each with `choices` choices."""

    def __init__(self, notifier: Notifier, prompts: int, choices: int) -> None:
        self.notifier = notifier
        self.inbox: deque[tuple[int, Event]] = deque()
        self.ready = asyncio.Event()
        self.jobs: list[Job] = []
        self.left = prompts * choices  # choices not finished yet

    def emitter(self, prompt: int) -> Any:
        """The emit callback of the job for prompt number `prompt` (runs on the scheduler's
        thread)."""
        def emit(event: Event) -> None:
            self.inbox.append((prompt, event))
            self.notifier.mark(self)

        return emit

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancel()

    async def batches(self, request: Any) -> AsyncIterator[list[tuple[int, Event]]]:
        """Lists of (prompt number, event), every event that arrived since the last, until
        every choice has finished or a job failed (the Failed event is the last); ClientGone
        if the client leaves first. Cancels the jobs whenever it stops early."""
        done = False
        try:
            while self.left > 0:
                if await request.is_disconnected():
                    raise ClientGone
                if not self.inbox:
                    try:
                        await asyncio.wait_for(self.ready.wait(), POLL_S)
                    except asyncio.TimeoutError:
                        continue
                self.ready.clear()  # before taking: a later event sets it again
                batch = []
                while self.inbox:
                    item = self.inbox.popleft()
                    batch.append(item)
                    if isinstance(item[1], Finished):
                        self.left -= 1
                    if isinstance(item[1], Failed):
                        break
                if not batch:  # a wake for events an earlier batch already took
                    continue
                yield batch
                if isinstance(batch[-1][1], Failed):
                    return
            done = True
        finally:
            if not done:
                self.cancel()


def notifier_of(app_state: Any) -> Notifier:
    """The running event loop's Notifier, made on first use (one loop per server)."""
    loop = asyncio.get_running_loop()
    notifier = getattr(app_state, "notifier", None)
    if notifier is None or notifier.loop is not loop:
        notifier = app_state.notifier = Notifier(loop)
    return notifier
