"""The lab's JSON API fuzzed from its own OpenAPI schema (Schemathesis): every operation,
with data that fits the schema and data that does not, must answer without a 5xx, with a
status the schema declares, and with a body valid against the schema; data outside the
schema must be refused (4xx). Derandomized and bounded, so `make test` is reproducible."""

from __future__ import annotations

import os

import pydantic
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import (  # the registry's names, stable across 4.x
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from tools.tinyrun import TEXT

from gptlab.lab.calculator.schemas import AttentionRequest
from gptlab.lab.context.schemas import ContextRequest
from gptlab.lab.model.schemas import (
    AblateRequest,
    AllHeadsRequest,
    HeadScoresRequest,
    HeadsRequest,
    LayerStepsRequest,
    LearnedPositionsRequest,
    WalkRequest,
)
from gptlab.lab.prediction.schemas import AppendRequest, LensRequest, NextTokenRequest
from gptlab.lab.server import create_app

# Per operation, on top of Schemathesis's explicit boundary cases; raise it to fuzz deeper.
MAX_EXAMPLES = int(os.environ.get("GPTLAB_FUZZ_EXAMPLES", "40"))
VOCAB = sorted(set(TEXT))  # the tiny run's characters
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance, negative_data_rejection,
          unsupported_method]

# The schema does not depend on the runs folder; the requests go to `lab` (below).
# POST /api/live/start is left out: every valid body starts a real training (a thread that
# writes a run into the runs folder shared by these tests); tests/lab/live/test_training.py
# fuzzes it with invalid bodies only and tests the valid path on its own. POST
# /api/experiments/quick likewise starts a real experiment (tests/lab/experiments/
# test_quickrun.py tests it).
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app("runs")).exclude(
    path="/api/live/start").exclude(path="/api/experiments/quick", method="POST")


def _fit_run(body: dict, run: str) -> dict:
    """body naming `run`, with ids, prompt, layer and head fitted to the tiny run. Only
    values of their fields' types are fitted: a request that has no such field may carry
    an extra key of that name holding anything (Schemathesis adds some), and keeps it."""
    out = dict(body, run=run)
    if isinstance(out.get("ids"), list) and all(isinstance(i, int) for i in out["ids"]):
        out["ids"] = [int(i) % len(VOCAB) for i in out["ids"]][:32]
    if isinstance(out.get("prompt"), str) and out["prompt"]:
        out["prompt"] = "".join(c for c in out["prompt"] if c in VOCAB)[:32] or "the cat"
    for name, n in (("layer", 2), ("head", 4)):
        if isinstance(out.get(name), int):
            out[name] = int(out[name]) % n
    return out


def _fit_matrices(body: dict, request: AttentionRequest) -> dict:
    """body with its edited matrices cut or padded to the shapes the tokens and d need."""
    out = dict(body)
    for name in ("x", "w_q", "w_k", "w_v"):
        if out.get(name) is not None:
            rows = len(request.tokens) if name == "x" else request.d
            padded = (out[name] + [[0.0]] * rows)[:rows]
            out[name] = [(row + [0.0] * request.d)[: request.d] for row in padded]
    return out


def _fit_text(body: dict, run: str) -> dict:
    """A next-token body naming `run`, its text cut to the tiny run's characters."""
    text = body.get("text")  # a negative case may send null or a number
    text = "".join(c for c in (text if isinstance(text, str) else "") if c in VOCAB)[:32] \
        or "the cat"
    return dict(body, run=run, text=text)


def _fit_lens(body: dict, run: str) -> dict:
    """A lens body: its text fitted as _fit_text does, its target mostly in the vocabulary."""
    out = _fit_text(body, run)
    if out.get("target") is not None and out["target"] % 4:  # a quarter stay out of range
        out["target"] %= len(VOCAB)
    return out


def _fit_context(body: dict, run: str) -> dict:
    """A longer-than-trained body: its text fitted as _fit_text does, its context mostly
    within the tiny run's 32 positions (a tenth past them, which learned positions refuse),
    its layer and head fitted; no context is the run's default."""
    out = _fit_run(_fit_text(body, run), run)
    if out.get("context") is not None and out["context"] % 10:
        out["context"] = 2 + out["context"] % 31
    return out


def _fit_walk(body: dict, run: str) -> dict:
    """A whole-model body: its text fitted as _fit_text does, its position mostly inside."""
    out = _fit_text(body, run)
    if out.get("position") is not None and out["position"] % 4:  # a quarter stay outside
        out["position"] %= len(out["text"])
    return out


FITS = {
    "/api/context": (ContextRequest, _fit_context),
    "/api/walk": (WalkRequest, _fit_walk),
    "/api/walk/layer": (LayerStepsRequest, lambda b, run: _fit_run(_fit_walk(b, run), run)),
    "/api/all_heads": (AllHeadsRequest, _fit_run),
    "/api/learned_positions": (LearnedPositionsRequest, _fit_run),
    "/api/next_token": (NextTokenRequest, _fit_text),
    "/api/next_token/append": (AppendRequest, _fit_text),
    "/api/lens": (LensRequest, _fit_lens),
    "/api/heads": (HeadsRequest, _fit_run),
    "/api/head_scores": (HeadScoresRequest, _fit_run),
    "/api/ablate": (AblateRequest, _fit_run),
    "/api/attention": (AttentionRequest, _fit_matrices),
}
OTHER_RUNS = ["escape", "notarun", "../tiny", "tiny/config.json"]  # see runs_root


@schema.hook
def flatmap_body(context, body):
    """Random bodies rarely reach the models' code: a random run name names no run, and
    random edited matrices seldom have the shape the tokens need. So valid bodies (not
    Schemathesis's negative cases) are often fitted: the run is mostly 'tiny', sometimes
    another entry of the folder (a symlink out, a non-run, a path out), with ids, prompt,
    layer and head fitted to tiny-gpt2; the matrices are cut or padded to their shape."""
    model, fit = FITS.get(context.operation.path, (None, None))
    if model is None:
        return st.just(body)
    try:
        request = model.model_validate(body)
    except pydantic.ValidationError:
        return st.just(body)
    if model is AttentionRequest:
        return st.sampled_from([True, False]).map(
            lambda fitted: fit(body, request) if fitted else body)
    # Mostly the real run (Hypothesis also simplifies towards it); sometimes the others.
    return st.sampled_from(["tiny", None, "tiny", *OTHER_RUNS]).map(
        lambda run: body if run is None else fit(body, run))


@pytest.fixture(scope="module")
def lab(runs_root):  # runs_root: tests/lab/conftest.py
    return create_app(runs_root)

@pytest.mark.timeout(60 + 3 * MAX_EXAMPLES)  # a hang fails one operation, not the run
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@schema.parametrize()
def test_lab_api_conforms_to_its_schema(case, lab):
    case.call_and_validate(app=lab, checks=CHECKS)


def test_every_operation_is_fuzzed():
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert len(operations) == 34, operations
    assert {("GET", "/api/features/dictionaries"), ("POST", "/api/features/search"),
            ("POST", "/api/features/feature")} <= operations
    assert ("POST", "/api/runs/encoding") in operations
    assert ("POST", "/api/ablate") in operations and ("GET", "/api/runs") in operations
    assert ("GET", "/api/live/events") in operations and ("POST", "/api/lens") in operations
    assert ("POST", "/api/live/start") not in operations
    assert ("POST", "/api/experiments/quick") not in operations
    assert {("POST", "/api/live/estimate"), ("GET", "/api/experiments/quick/events")} \
        <= operations
    assert {("POST", "/api/walk"), ("POST", "/api/walk/layer"), ("POST", "/api/all_heads"),
            ("POST", "/api/learned_positions"), ("GET", "/api/experiments"),
            ("POST", "/api/experiments/report")} <= operations
