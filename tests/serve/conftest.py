"""What the serve tests share: the shipped model served once, on a free loopback port,
and an openai client pointed at it."""

from __future__ import annotations

import pytest

from gptlab.serve.app import BackgroundServer, open_model

MODEL = "shakespeare"


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread_module):
    """The tiny model on one thread: two on a busy 2-core machine spin-wait (tests/conftest)."""


@pytest.fixture(scope="module")
def served():
    return open_model(MODEL, max_batch=32)


@pytest.fixture(scope="module")
def server(served):
    with BackgroundServer(served) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server, api_key="unused", max_retries=0, timeout=120)
