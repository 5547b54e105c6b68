"""Events from the scheduler's thread reach the event loop in batches: many events, one
wake; a Run ends after its last choice finishes or a failure, and cancels its jobs when it
stops early (the client gone)."""

from __future__ import annotations

import asyncio
import threading

from gptlab.model.decoding import SamplingSettings
from gptlab.serve.bridge import ClientGone, Notifier, Run
from gptlab.serve.scheduler import Failed, Finished, Job, Token


class Client:
    def __init__(self, gone: bool = False) -> None:
        self.gone = gone

    async def is_disconnected(self) -> bool:
        return self.gone


def job(run: Run) -> Job:
    made = Job([1], 4, SamplingSettings(), run.emitter(0), n=2)
    run.jobs.append(made)
    return made


def test_events_from_another_thread_come_in_one_batch_after_one_wake():
    async def main():
        loop = asyncio.get_running_loop()
        notifier = Notifier(loop)
        wakes = []
        wake = notifier._wake
        notifier._wake = lambda: (wakes.append(1), wake())
        run = Run(notifier, 1, 2)
        emit = job(run).emit

        def scheduler_thread():
            for i in range(5):
                emit(Token(i % 2, i, "x", None))
            emit(Finished(0, "length", ""))
            emit(Finished(1, "stop", ""))

        thread = threading.Thread(target=scheduler_thread)
        thread.start()
        thread.join()
        batches = [batch async for batch in run.batches(Client())]
        return wakes, batches, run

    wakes, batches, run = asyncio.run(main())
    assert len(wakes) == 1 and len(batches) == 1 and len(batches[0]) == 7
    assert run.left == 0 and not run.jobs[0].cancelled


def test_a_failure_ends_the_run_and_a_client_gone_cancels_its_jobs():
    async def main(gone: bool):
        run = Run(Notifier(asyncio.get_running_loop()), 1, 2)
        made = job(run)
        made.emit(Failed("boom"))
        out = []
        try:
            async for batch in run.batches(Client(gone)):
                out.append(batch)
        except ClientGone:
            out.append("gone")
        return out, made

    out, made = asyncio.run(main(False))
    assert [type(e) for _, e in out[0]] == [Failed] and made.cancelled
    out, made = asyncio.run(main(True))
    assert out == ["gone"] and made.cancelled


def test_a_batch_is_never_empty():
    async def main():
        run = Run(Notifier(asyncio.get_running_loop()), 1, 1)
        made = job(run)
        run.ready.set()  # a wake whose events an earlier batch took
        asyncio.get_running_loop().call_later(0.05, made.emit, Finished(0, "stop", ""))
        return [batch async for batch in run.batches(Client())]

    assert [len(b) for b in asyncio.run(main())] == [1]


