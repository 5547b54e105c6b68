"""gptlab serve behind the lab's guard: beyond loopback the openai client's api_key is the
token (Authorization: Bearer), a missing or wrong one a 401 the client raises as
AuthenticationError; a foreign Host or Origin a 403; every refusal in OpenAI's shape."""

from __future__ import annotations

import httpx
import openai
import pytest

from gptlab.serve.app import BackgroundServer

TOKEN = "a-long-enough-secret-for-tests"


@pytest.fixture(scope="module")
def guarded(served):
    """The server on every interface (a token needed), reached by its IP address."""
    with BackgroundServer(served, host="0.0.0.0", token=TOKEN) as base_url:
        yield base_url.replace("0.0.0.0", "127.0.0.1")


def test_the_api_key_is_the_token_beyond_loopback(guarded):
    good = openai.OpenAI(base_url=guarded, api_key=TOKEN, max_retries=0)
    assert good.completions.create(model="shakespeare", prompt="ROMEO:", max_tokens=3,
                                   temperature=0).usage.completion_tokens == 3
    for key in ("wrong-token", ""):
        bad = openai.OpenAI(base_url=guarded, api_key=key or "x", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            bad.models.list()
        assert caught.value.body["code"] == "invalid_api_key"
        assert "wrong token; use the one `gptlab serve` printed" in caught.value.body["message"]
    bare = httpx.get(f"{guarded}/models", timeout=30)
    assert bare.status_code == 401
    assert "send 'Authorization: Bearer TOKEN'" in bare.json()["error"]["message"]
    lab_style = httpx.get(f"{guarded}/models", headers={"Authorization": f"token {TOKEN}"},
                          timeout=30)
    assert lab_style.status_code == 200


def test_a_foreign_host_or_origin_is_refused_whatever_the_token(guarded):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    rebound = httpx.get(f"{guarded}/models", headers={**headers, "Host": "evil.example"},
                        timeout=30)
    assert rebound.status_code == 403
    error = rebound.json()["error"]
    assert error["type"] == "permission_error"
    assert "is not an address this server serves" in error["message"]
    page = httpx.post(f"{guarded}/completions", timeout=30,
                      headers={**headers, "Origin": "https://evil.example"},
                      json={"model": "shakespeare", "prompt": "ROMEO:", "max_tokens": 1})
    assert page.status_code == 403 and "is not this server's page" in page.text


def test_on_loopback_no_token_is_needed_and_a_given_one_is_checked(served, server):
    assert httpx.get(f"{server}/models", timeout=30).status_code == 200
    with BackgroundServer(served, token=TOKEN) as base_url:
        assert httpx.get(f"{base_url}/models", timeout=30).status_code == 401
        ok = httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {TOKEN}"},
                       timeout=30)
        assert ok.status_code == 200
