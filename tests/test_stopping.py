"""gptlab.stopping: SIGINT and SIGTERM as Interrupted (exit 130 / 143), deferred for the
trainer and raised by check() in a long loop. Real signals, sent to this process."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from gptlab import stopping


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_raises_interrupted_with_the_shells_exit_code(sig, code):
    with pytest.raises(stopping.Interrupted) as caught, stopping.raise_on_signals():
        os.kill(os.getpid(), sig)
        for _ in range(1000):  # the handler runs between two bytecodes
            pass
    assert caught.value.exit_code == code and isinstance(caught.value, KeyboardInterrupt)


def test_raise_on_signals_puts_the_previous_handlers_back():
    before = {sig: signal.getsignal(sig) for sig in stopping.SIGNALS}
    with stopping.raise_on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in stopping.SIGNALS} == before


def test_an_ignored_sigint_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stopping.raise_on_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_deferred_sets_the_event_then_check_raises_and_a_second_signal_raises_at_once():
    stop = threading.Event()
    with stopping.deferred(stop.set) as seen:
        stopping.check()  # nothing came yet
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
        assert stop.is_set() and seen.signum == signal.SIGTERM
        with pytest.raises(stopping.Interrupted) as first:
            stopping.check()
        assert first.value.exit_code == 143
        with pytest.raises(stopping.Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
    stopping.check()  # the scope is over: nothing is pending


def test_exit_code_of_no_signal_is_a_ctrl_c():
    assert stopping.exit_code(None) == 130 and stopping.exit_code(signal.SIGTERM) == 143


def test_a_probe_stops_at_a_deferred_signal_between_two_timings():
    from gptlab import probe

    calls = []

    def step():
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with stopping.deferred(lambda: None), pytest.raises(stopping.Interrupted):
        probe.median_seconds(step, reps=50)
    assert len(calls) == 2  # not the 51 it was asked for
