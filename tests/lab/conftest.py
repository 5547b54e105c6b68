"""Shared by the lab's tests: one thread for each module (the lab's matrices are tiny, and
on a busy 2-core machine two threads only contend), the runs folder the API tests share, a
client for it, and the calls every API test makes."""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from gptlab.lab.server import create_app


@pytest.fixture(scope="module", autouse=True)
def _one_thread_per_module(one_thread_module):
    """Every lab module, its fixtures and the server threads it starts, on one thread."""


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory, copy_tiny_run):
    """A lab runs folder: 'tiny' (a copy of the tiny run), 'escape' (a symlink to a run
    outside the folder) and 'notarun' (an empty folder). Shared by the API tests."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    outside = tmp_path_factory.mktemp("outside")
    copy_tiny_run(outside / "secret")
    (root / "escape").symlink_to(outside / "secret", target_is_directory=True)
    (root / "notarun").mkdir()
    return root


@pytest.fixture(scope="module")
def client(runs_root):
    """The lab's app over runs_root, called in this process."""
    return TestClient(create_app(runs_root))


@pytest.fixture(scope="session")
def post():
    """post(client, path, body, status=200) -> the JSON answer, its status checked."""
    def call(client, path: str, body, status: int = 200):
        r = client.post(path, json=body)
        assert r.status_code == status, r.text
        return r.json()

    return call


@pytest.fixture(scope="session")
def bad():
    """bad(client, path, body, fragment): the body (an object, or raw text or bytes) gets a
    400 whose one-line message names the problem."""
    def call(client, path: str, body, fragment: str) -> None:
        r = client.post(path, content=body if isinstance(body, (str, bytes)) else json.dumps(body),
                        headers={"content-type": "application/json"})
        assert r.status_code == 400, (r.status_code, r.text)
        message = r.json()["error"]
        assert fragment in message and "\n" not in message, message

    return call


@pytest.fixture(scope="session")
def served():
    """served(router, client) -> {(path, method)} of an area's router: one of the routers
    create_app composes (server.ROUTERS), each route checking its body (CheckedBody), each
    path routed by the client's app (the other method: 405, not 404)."""
    from gptlab.lab.server import ROUTERS
    from gptlab.web.body import CheckedBody

    def routes(router, client) -> set[tuple[str, str]]:
        assert any(router is r for r in ROUTERS)
        assert all(isinstance(r, CheckedBody) for r in router.routes)
        declared = {(r.path, m.lower()) for r in router.routes for m in r.methods}
        for path, method in declared:
            other = client.get(path) if method == "post" else client.post(path, json={})
            assert other.status_code == 405, (path, other.status_code)
        return declared

    return routes


@pytest.fixture(scope="session")
def invalid():
    """invalid(model, body) -> the one line (gptlab.lab.fields.one_line) the server would
    answer with when the request model refuses body."""
    from pydantic import ValidationError

    from gptlab.lab.fields import one_line

    def refuse(model, body) -> str:
        with pytest.raises(ValidationError) as error:
            model.model_validate(body)
        line = one_line(error.value.errors())
        assert "\n" not in line
        return line

    return refuse


@pytest.fixture(scope="session")
def np_attention():
    """np_attention(x, wq, wk, wv, causal) -> {q, k, v, scores, masked, weights, out}: one
    attention head in float64 NumPy, the reference the calculator's stages (view 1) and a
    run's heads (view 3) are checked against."""
    def head(x, wq, wk, wv, causal):
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = q @ k.T / math.sqrt(q.shape[1])
        masked = scores.copy()
        if causal:
            masked[np.triu_indices(len(x), 1)] = -np.inf
        e = np.exp(masked - masked.max(axis=1, keepdims=True))
        weights = e / e.sum(axis=1, keepdims=True)
        return {"q": q, "k": k, "v": v, "scores": scores, "masked": masked, "weights": weights,
                "out": weights @ v}

    return head


@pytest.fixture(scope="session")
def fits_a_phone():
    """`with fits_a_phone(page, redrawn=None):` the page at phone width (390 px, waiting
    for the JS condition `redrawn` where a view redraws for a width) must not scroll
    sideways, and axe-core must find nothing serious or critical; then the body runs, and
    the page gets its width back."""
    @contextlib.contextmanager
    def check(page, redrawn: str | None = None):
        from axe_playwright_python.sync_playwright import Axe

        page.set_viewport_size({"width": 390, "height": 844})
        try:
            if redrawn:
                page.wait_for_function(redrawn)
            # reading the width lays the page out: no wait for layout itself
            width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            assert width[0] <= width[1], width
            found = Axe().run(page).response["violations"]
            serious = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in found
                       if v["impact"] in ("serious", "critical")]
            assert not serious, serious
            yield
        finally:
            page.set_viewport_size({"width": 1280, "height": 900})

    return check


@pytest.fixture(scope="session")
def download():
    """download(page, testid, folder) -> (suggested file name, saved path): click the button
    `testid` (a figure's export) and keep what the browser downloads."""
    def save(page, testid: str, folder):
        with page.expect_download() as info:
            page.get_by_test_id(testid).click()
        path = folder / info.value.suggested_filename
        info.value.save_as(path)
        return info.value.suggested_filename, path

    return save
