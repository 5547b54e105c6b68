"""The lab's server (gptlab.lab.server): the page and its assets, served offline; hostile
values and wrong methods all get a 4xx with a message, never a 500; the OpenAPI schema
documents the 400s. (Bodies sent as JSON: tests/lab/test_body.py.)"""

from __future__ import annotations

import re

import pytest

from gptlab import GPTConfig
from gptlab.lab.server import STATIC


def test_page_and_assets_are_served_and_offline(client):
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    for path in STATIC.iterdir():  # the page's ES modules run only when served as JavaScript
        served = client.get(f"/static/{path.name}")
        assert served.status_code == 200, path.name
        if path.suffix == ".js":
            assert served.headers["content-type"].startswith("text/javascript"), path.name
    assert client.get("/static/../server.py").status_code == 404
    assert client.get("/nope").status_code == 404 and "error" in client.get("/nope").json()
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+[^\s\"')]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (path.name, urls)


HOSTILE = [None, -1, 0, 2**70, 1e308, -1e308, "x", "", [], [[]], {}, True, "../../etc/passwd"]

FIELDS = {
    "/api/attention": {"tokens": "cat sat", "d": 4, "seed": 0, "causal": True, "x": None},
    "/api/scaling": {"d_k": 64, "n_keys": 16, "seed": 0},
    "/api/sinusoidal": {"positions": 8, "d_model": 8},
    "/api/rope": {"head_dim": 8, "base": 10000, "positions": 8, "offset": 2, "seed": 0},
    "/api/params": {"preset": "gpt2", "config": {"n_layer": 2}, "seq_len": 16},
    "/api/heads": {"run": "tiny", "prompt": "the", "layer": 0},
    "/api/head_scores": {"run": "tiny", "prompt": "the cat", "seed": 0},
    "/api/ablate": {"run": "tiny", "layer": 0, "head": 0, "ids": [1, 2, 3]},
    "/api/quiz": {"kind": "params", "seed": 0},
    "/api/quiz/check": {"kind": "sqrt_dk", "seed": 0, "answer": "8"},
}


@pytest.mark.parametrize("path", list(FIELDS))
def test_hostile_values_get_a_4xx_or_an_answer_never_a_500(client, path, post):
    for field in FIELDS[path]:
        for value in HOSTILE:
            body = dict(FIELDS[path], **{field: value})
            r = client.post(path, json=body)
            assert r.status_code in (200, 400), (path, field, value, r.status_code, r.text)
            if r.status_code == 400:
                assert r.json()["error"], (path, field, value)
    config_fields = GPTConfig.from_preset("gpt2").to_dict()
    if path == "/api/params":
        for field in config_fields:
            for value in HOSTILE:
                r = client.post(path, json={"preset": "gpt2", "config": {field: value}})
                assert r.status_code in (200, 400), (field, value, r.text)
    assert client.get(path).status_code == 405


def test_inputs_that_once_were_500s_are_400s(client, bad):
    # A run name longer than a file name may be (ENAMETOOLONG); found by tests/lab/test_fuzz.py.
    bad(client, "/api/heads", {"run": "0" * 300, "prompt": "the"}, "File name too long")
    # A lone surrogate, echoed back, could not be encoded as UTF-8.
    bad(client, "/api/attention", '{"tokens": "\\ud800 b"}', "tokens must be valid Unicode")
    bad(client, "/api/heads", '{"run": "\\ud800", "prompt": "the"}', "run must be valid Unicode")
    # Infinity (Python's json reads it) in a config echoed back could not be written as JSON.
    bad(client, "/api/params", '{"preset": "llama2-7b", "config": {"rope_scaling": '
        '{"type": "linear", "factor": Infinity}}}', "config.rope_scaling.factor must be")
    bad(client, "/api/params", {"config": {"n_layer": 10**400}}, "between 1 and 10000000")


def test_a_405_names_the_allowed_method(client):
    r = client.get("/api/attention")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["error"]


def test_openapi_schema_documents_the_400s(client):
    schema = client.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "422" not in codes, (path, method)
            if method == "post":
                assert {"200", "400"} <= codes, (path, codes)
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]
    limits = schema["components"]["schemas"]["AttentionRequest"]["properties"]["d"]
    assert (limits["minimum"], limits["maximum"]) == (1, 64)


# Every route of the API, as the areas' routers declare them (gptlab.lab.server.ROUTERS).
ROUTES = {
    ("/api/features/dictionaries", "get"), ("/api/features/search", "post"),
    ("/api/features/feature", "post"),  # features
    ("/api/attention", "post"), ("/api/scaling", "post"), ("/api/sinusoidal", "post"),
    ("/api/rope", "post"), ("/api/params", "post"), ("/api/presets", "get"),
    ("/api/quiz", "post"), ("/api/quiz/check", "post"),  # calculator
    ("/api/heads", "post"), ("/api/head_scores", "post"), ("/api/ablate", "post"),
    ("/api/runs", "get"), ("/api/runs/encoding", "post"), ("/api/walk", "post"),
    ("/api/walk/layer", "post"),
    ("/api/all_heads", "post"), ("/api/learned_positions", "post"),  # model
    ("/api/next_token", "post"), ("/api/next_token/append", "post"),
    ("/api/lens", "post"),  # prediction
    ("/api/live/start", "post"), ("/api/live/stop", "post"), ("/api/live/status", "get"),
    ("/api/live/events", "get"), ("/api/live/estimate", "post"),  # live
    ("/api/context", "post"), ("/api/context/experiments", "get"),
    ("/api/context/experiment", "post"),  # context
    ("/api/experiments", "get"), ("/api/experiments/report", "post"),
    ("/api/experiments/quick", "post"), ("/api/experiments/quick/status", "get"),
    ("/api/experiments/quick/events", "get"),  # experiments
}


def test_create_app_composes_every_areas_router_with_the_body_check(client):
    """The API is the areas' routers (server.ROUTERS), each route once, documented; every
    POST keeps the body check (CheckedBody) its router gives it."""
    from gptlab.lab.server import ROUTERS

    documented = {(p, m) for p, ops in client.get("/openapi.json").json()["paths"].items()
                  for m in ops}
    declared = [(r.path, m.lower()) for router in ROUTERS for r in router.routes
                for m in r.methods]
    assert documented == set(declared) == ROUTES and len(declared) == len(ROUTES)
    for path, method in sorted(ROUTES):
        if method == "post":
            r = client.post(path, content="{}", headers={"content-type": "text/plain"})
            assert r.status_code == 400, (path, r.text)
            assert "must be sent with Content-Type: application/json" in r.json()["error"]
