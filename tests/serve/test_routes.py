"""gptlab serve as the official openai client sees it, on a real server on a free loopback
port: completions, streams, chat refused without a template, stop strings, n > 1, seeds,
log-probabilities equal to `gptlab eval`'s, greedy text equal to `gptlab sample --greedy`,
errors in OpenAI's shape."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import openai
import pytest
import torch

from gptlab.inference.evaluate import window_nlls
from gptlab.pretrained import verified
from gptlab.serve.app import BackgroundServer, open_model

MODEL = "shakespeare"
# A chat template in the shipped model's characters (it has no chat template of its own).
TEMPLATE = ("{% for m in messages %}{{ m['role'] | upper }}:\n{{ m['content'] }}\n\n"
            "{% endfor %}{% if add_generation_prompt %}ROMEO:\n{% endif %}")


@pytest.fixture(scope="module")
def served_with_template(tmp_path_factory):
    folder = tmp_path_factory.mktemp("templated")
    shipped = verified(MODEL)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(shipped / name, folder / name)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    return open_model(folder, name="templated")


@pytest.fixture(scope="module")
def chat_client(served_with_template):
    with BackgroundServer(served_with_template) as base_url:
        yield openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)


def test_the_model_is_listed_with_its_context(client):
    [card] = client.models.list().data
    assert card.id == MODEL and card.owned_by == "gptlab"
    assert card.model_extra["max_model_len"] == 128


def test_greedy_text_is_what_gptlab_sample_greedy_prints(client):
    answer = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=60,
                                       temperature=0)
    sample = subprocess.run(
        [sys.executable, "-m", "gptlab", "sample", MODEL, "--prompt", "ROMEO:", "--greedy",
         "--max-new-tokens", "60", "--no-prompt"], capture_output=True, text=True,
        timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert sample.returncode == 0, sample.stderr
    assert answer.choices[0].text == sample.stdout.removesuffix("\n")
    assert answer.choices[0].finish_reason == "length"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (6, 60)
    assert answer.usage.total_tokens == 66


def test_32_concurrent_greedy_requests_each_get_what_they_get_alone(client):
    prompts = [("ROMEO:", "JULIET:\nO", "First Citizen:\n", "What, ")[i % 4] + " " * (i // 4)
               for i in range(32)]

    def ask(prompt: str) -> str:
        return client.completions.create(model=MODEL, prompt=prompt, max_tokens=30,
                                         temperature=0).choices[0].text

    alone = {p: ask(p) for p in prompts[:8]}
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        together = list(pool.map(ask, prompts))
    for prompt, text in zip(prompts, together, strict=True):
        if prompt in alone:
            assert text == alone[prompt]
    assert len(set(together)) > 4


def test_a_stream_is_the_same_text_in_pieces_with_usage_and_done(client, server):
    whole = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=40,
                                      temperature=0)
    chunks = list(client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=40,
                                            temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert len(chunks) > 10 and chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 40
    with_usage = list(client.completions.create(
        model=MODEL, prompt="ROMEO:", max_tokens=5, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert with_usage[-1].choices == [] and with_usage[-1].usage.total_tokens == 11
    body = {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 3, "stream": True}
    raw = httpx.post(f"{server}/completions", json=body, timeout=60)
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.text.endswith("data: [DONE]\n\n")


def test_a_chat_stream_opens_with_the_role(chat_client):
    chunks = list(chat_client.chat.completions.create(
        model="templated", messages=[{"role": "user", "content": "Who art thou?"}],
        max_tokens=10, temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    whole = chat_client.chat.completions.create(
        model="templated", messages=[{"role": "user", "content": "Who art thou?"}],
        max_tokens=10, temperature=0)
    assert text == whole.choices[0].message.content
    assert whole.choices[0].message.role == "assistant"


def test_chat_is_refused_in_one_clear_error_without_a_template(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL,
                                       messages=[{"role": "user", "content": "Hi"}])
    error = caught.value.body
    assert error["code"] == "no_chat_template" and error["type"] == "invalid_request_error"
    assert "has no chat template" in error["message"]


def test_chat_renders_the_template_and_continues_it(chat_client, served_with_template):
    messages = [{"role": "system", "content": "Speak as in a play."},
                {"role": "user", "content": "Who art thou?"}]
    answer = chat_client.chat.completions.create(model="templated", messages=messages,
                                                 max_tokens=20, temperature=0,
                                                 logprobs=True, top_logprobs=2)
    from transformers.utils.chat_template_utils import render_jinja_template

    [prompt], _ = render_jinja_template(conversations=[messages], add_generation_prompt=True,
                                        chat_template=TEMPLATE, bos_token="", eos_token="")
    assert prompt == "SYSTEM:\nSpeak as in a play.\n\nUSER:\nWho art thou?\n\nROMEO:\n"
    plain = chat_client.completions.create(model="templated", prompt=prompt, max_tokens=20,
                                           temperature=0)
    assert answer.choices[0].message.content == plain.choices[0].text
    assert answer.usage.prompt_tokens == len(prompt)
    content = answer.choices[0].logprobs.content
    assert len(content) == 20 and all(len(c.top_logprobs) == 2 for c in content)


def test_stop_strings_end_the_text_before_them(client):
    free = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=80,
                                     temperature=0).choices[0].text
    stop = free[20:23]
    answer = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=80,
                                       temperature=0, stop=[stop, "zzz"])
    assert answer.choices[0].text == free[:free.index(stop)]
    assert answer.choices[0].finish_reason == "stop"
    streamed = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=80,
                                         temperature=0, stop=stop, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == answer.choices[0].text


def test_n_choices_per_prompt_are_indexed_prompt_by_prompt(client):
    answer = client.completions.create(model=MODEL, prompt=["ROMEO:", "JULIET:"], n=3,
                                       max_tokens=20, temperature=1.0, seed=5)
    assert [c.index for c in answer.choices] == list(range(6))
    first, second = answer.choices[:3], answer.choices[3:]
    assert len({c.text for c in first}) == 3
    assert answer.usage.completion_tokens == 6 * 20 and answer.usage.prompt_tokens == 6 + 7
    echoed = client.completions.create(model=MODEL, prompt=["ROMEO:", "JULIET:"], n=2,
                                       max_tokens=3, echo=True)
    assert [c.text[:7] for c in echoed.choices] == ["ROMEO:" + c.text[6] for c in
                                                    echoed.choices[:2]] + [
        "JULIET:"] * 2
    del second


def test_a_seed_repeats_its_sample_and_another_seed_does_not(client):
    def ask(seed: int) -> list[str]:
        answer = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=40,
                                           temperature=1.0, top_p=0.95, seed=seed, n=2,
                                           extra_body={"top_k": 40})
        return [c.text for c in answer.choices]

    assert ask(11) == ask(11) != ask(12)


def test_logprobs_equal_gptlab_evals_per_token_log_probabilities(client, served):
    text = "ROMEO:\nBut soft, what light through yonder window breaks?"
    answer = client.completions.create(model=MODEL, prompt=text, max_tokens=0, echo=True,
                                       logprobs=3)
    logprobs = answer.choices[0].logprobs
    ids = torch.tensor(served.tokenizer.encode(text))
    [(_, nll)] = list(window_nlls(served.model, ids, [(0, len(ids), 1)], 1))
    assert logprobs.token_logprobs[0] is None and logprobs.tokens == list(text)
    assert torch.allclose(torch.tensor(logprobs.token_logprobs[1:], dtype=torch.float64),
                          -nll[0].double(), atol=1e-5, rtol=0)
    assert answer.choices[0].text == text and answer.usage.completion_tokens == 0
    assert logprobs.text_offset == list(range(len(text)))
    for token, lp, top in zip(logprobs.tokens[1:], logprobs.token_logprobs[1:],
                              logprobs.top_logprobs[1:], strict=True):
        assert top[token] == lp and 3 <= len(top) <= 4  # the 3 likeliest and the chosen one
        assert max(top.values()) >= lp
    generated = client.completions.create(model=MODEL, prompt="ROMEO:", max_tokens=5,
                                          temperature=0, logprobs=1)
    chosen = generated.choices[0].logprobs
    assert "".join(chosen.tokens) == generated.choices[0].text
    assert all(lp == max(top.values()) for lp, top in zip(chosen.token_logprobs,
                                                          chosen.top_logprobs, strict=True))


@pytest.mark.parametrize("kwargs, status, fragment", [
    ({"max_tokens": 200}, 400, "more than the model's context of 128: ask for at most 122"),
    ({"model": "gpt-4"}, 404, "this server serves 'shakespeare'"),
    ({"temperature": 3}, 400, "temperature"),
    ({"prompt": "ROMEO: \u00e9"}, 400, "cannot be encoded"),
    ({"prompt": [9999]}, 400, "outside the vocabulary (0..75)"),
    ({"prompt": ""}, 400, "the prompt is empty"),
    ({"n": 40}, 400, "at most 32 texts at once"),
    ({"presence_penalty": 0.5}, 400, "presence_penalty is not supported"),
    ({"stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ({"logprobs": 21}, 400, "logprobs"),
])
def test_bad_requests_get_openais_error_object(client, kwargs, status, fragment):
    args = {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 4, **kwargs}
    with pytest.raises(openai.APIStatusError) as caught:
        client.completions.create(**args)
    assert caught.value.status_code == status
    error = caught.value.body
    assert set(error) == {"message", "type", "param", "code"}
    assert fragment in error["message"]


def test_unknown_routes_and_methods_answer_in_the_same_shape(server):
    missing = httpx.get(f"{server}/engines", timeout=30)
    assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
    wrong = httpx.get(f"{server}/completions", timeout=30)
    assert wrong.status_code == 405 and wrong.json()["error"]["type"]
    big = httpx.post(f"{server}/completions", timeout=30, json={
        "model": MODEL, "prompt": "x" * 300_000})
    assert big.status_code == 400 and "limit" in big.json()["error"]["message"]


def test_a_stream_whose_client_leaves_frees_its_row(server, served, monkeypatch):
    decode = served.scheduler._decode

    def slow() -> None:  # 120 steps take seconds: the client leaves well before the end
        time.sleep(0.02)
        decode()

    monkeypatch.setattr(served.scheduler, "_decode", slow)
    body = {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 120, "stream": True}
    with httpx.stream("POST", f"{server}/completions", json=body, timeout=60) as answer:
        data = (line for line in answer.iter_lines() if line)
        for _ in range(3):  # the first token comes with the prefill, before its row exists
            assert next(data).startswith("data: {")
        [choice] = served.scheduler.rows
    deadline = time.monotonic() + 20
    while served.scheduler.rows and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not served.scheduler.rows and served.scheduler.cache.n == 0
    assert choice.job.cancelled and choice.made < 60
