"""One request's jobs seen from the event loop: the scheduler thread's events handed over
(call_soon_threadsafe into an asyncio.Queue), iterated until every choice has finished, and
the jobs cancelled when the client goes away.

Whether the client is still there is asked between events and every POLL_S while none come
(Request.is_disconnected), so a stream whose reader closed its connection frees its rows at
the scheduler's next step, whether or not the server is sending at that moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from gptlab.serve.scheduler import Event, Failed, Finished, Job

POLL_S = 0.25


class ClientGone(Exception):
    """The client closed its connection: the jobs are cancelled."""


class Run:
    """The jobs of one request (one per prompt), each with `choices` choices."""

    def __init__(self, loop: asyncio.AbstractEventLoop, prompts: int, choices: int) -> None:
        self.loop, self.queue = loop, asyncio.Queue()
        self.jobs: list[Job] = []
        self.left = prompts * choices  # choices not finished yet

    def emitter(self, prompt: int) -> Any:
        """The emit callback of the job for prompt number `prompt` (runs on the scheduler's
        thread)."""
        def emit(event: Event) -> None:
            try:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, (prompt, event))
            except RuntimeError:  # the loop is closed: the server is stopping
                pass

        return emit

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancel()

    async def events(self, request: Any) -> AsyncIterator[tuple[int, Event]]:
        """(prompt number, event) until every choice has finished or one job failed (the
        Failed event is the last); ClientGone if the client leaves first. Cancels the jobs
        whenever it stops early."""
        done = False
        try:
            while self.left > 0:
                if await request.is_disconnected():
                    raise ClientGone
                try:
                    item = await asyncio.wait_for(self.queue.get(), POLL_S)
                except asyncio.TimeoutError:
                    continue
                if isinstance(item[1], Finished):
                    self.left -= 1
                yield item
                if isinstance(item[1], Failed):
                    return
            done = True
        finally:
            if not done:
                self.cancel()
