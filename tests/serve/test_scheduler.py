"""The scheduler without HTTP: greedy text equals `gptlab sample --greedy`'s (its
generate_text) for every one of 32 prompts decoded together; a cancelled job frees its rows
at the next step; seeded sampling repeats."""

from __future__ import annotations

import torch

from gptlab.inference.sampling import generate_text
from gptlab.model.decoding import SamplingSettings
from gptlab.serve.app import open_model
from gptlab.serve.scheduler import PREFILL_TOKENS, Finished, Job, Scheduler, Token

GREEDY = SamplingSettings(temperature=0)
PROMPTS = ["ROMEO:", "JULIET:\nO", "First Citizen:\nWe", "\n", "KING RICHARD III:\nNow is",
           "What, ", "To be, or not", "MENENIUS:\nI tell you, friends"]


def prompts(n: int) -> list[str]:
    """n prompts of many lengths (each base prompt cut at several places)."""
    out = []
    for i in range(n):
        base = PROMPTS[i % len(PROMPTS)]
        out.append(base[:max(1, len(base) - i // len(PROMPTS))])
    return out


class Collect:
    def __init__(self) -> None:
        self.events = []

    def __call__(self, event) -> None:
        self.events.append(event)

    def text(self, choice: int = 0) -> str:
        return "".join(e.text for e in self.events
                       if isinstance(e, Token | Finished) and e.choice == choice)

    def finished(self) -> bool:
        return any(isinstance(e, Finished) for e in self.events)


def drain(scheduler: Scheduler, jobs: list[Job]) -> None:
    with torch.inference_mode():
        while scheduler.waiting or scheduler.rows:
            scheduler.step()


def test_32_greedy_prompts_together_are_each_what_sample_gives_alone():
    served = open_model("shakespeare", max_batch=32)
    model, tok = served.model, served.tokenizer
    texts = prompts(32)
    lengths = [24 + 5 * (i % 5) for i in range(32)]  # they finish at different steps
    collected = [Collect() for _ in texts]
    jobs = [Job(tok.encode(t), n, GREEDY, c) for t, n, c in zip(texts, lengths, collected,
                                                                 strict=True)]
    scheduler = served.scheduler
    for job in jobs:
        scheduler.submit(job)
    drain(scheduler, jobs)
    assert scheduler.steps < sum(lengths) // 8  # decoded together, not one by one
    for text, n, c in zip(texts, lengths, collected, strict=True):
        alone = generate_text(model, tok.encode, tok.decode, text, n, GREEDY)
        assert c.text() == alone, text


def test_a_cancelled_job_frees_its_rows_at_the_next_step():
    served = open_model("shakespeare", max_batch=4)
    scheduler, tok = served.scheduler, served.tokenizer
    keep, gone = Collect(), Collect()
    a = Job(tok.encode("ROMEO:"), 50, GREEDY, keep)
    b = Job(tok.encode("JULIET:"), 50, GREEDY, gone, n=3)
    scheduler.submit(a)
    scheduler.submit(b)
    with torch.inference_mode():
        scheduler.step()
        assert scheduler.cache.n == len(scheduler.rows) == 4
        b.cancel()
        scheduler.step()
        assert scheduler.cache.n == len(scheduler.rows) == 1
        assert scheduler.rows[0].job is a and scheduler.rows[0].row == 0
    drain(scheduler, [a])
    assert keep.finished() and not gone.finished()
    assert keep.text() == generate_text(served.model, tok.encode, tok.decode, "ROMEO:", 50,
                                        GREEDY)


def test_seeded_choices_repeat_and_differ_from_each_other():
    served = open_model("shakespeare", max_batch=8)
    settings = SamplingSettings(temperature=1.0)
    ids = served.tokenizer.encode("ROMEO:")

    def run(seed: int) -> list[str]:
        c = Collect()
        served.scheduler.submit(Job(ids, 30, settings, c, n=3, seeds=served.seeds(seed, 3)))
        drain(served.scheduler, [])
        return [c.text(i) for i in range(3)]

    first = run(7)
    assert run(7) == first and len(set(first)) == 3 and run(8) != first


def test_a_seeded_choice_draws_the_same_text_alone_and_beside_others():
    """Rows of one sampling setting are filtered together: a row's distribution, and so its
    seeded draws, do not depend on the rows beside it."""
    served = open_model("shakespeare", max_batch=8)
    settings = SamplingSettings(temperature=0.9, top_k=30, top_p=0.9)
    tok = served.tokenizer

    def texts(prompts: list[str]) -> list[str]:
        collected = [Collect() for _ in prompts]
        for i, (prompt, c) in enumerate(zip(prompts, collected, strict=True)):
            served.scheduler.submit(Job(tok.encode(prompt), 40, settings, c, seeds=(100 + i,)))
        drain(served.scheduler, [])
        return [c.text() for c in collected]

    alone = texts(["ROMEO:"])[0]
    assert texts(["ROMEO:", "JULIET:", "First Citizen:", "What, "])[0] == alone


def test_a_crowd_is_admitted_a_few_prompts_a_step_while_the_running_rows_decode():
    served = open_model("shakespeare", max_batch=32)
    scheduler, tok = served.scheduler, served.tokenizer
    first = Collect()
    scheduler.submit(Job(tok.encode("ROMEO:"), 40, GREEDY, first))
    with torch.inference_mode():
        scheduler.step()
    prompt = tok.encode("First Citizen:\nBefore we proceed any further, hear me speak.")
    assert len(prompt) * 4 < PREFILL_TOKENS < len(prompt) * 8
    for _ in range(20):
        scheduler.submit(Job(prompt, 5, GREEDY, Collect()))
    with torch.inference_mode():
        scheduler.step()
    admitted = 20 - len(scheduler.waiting)
    assert 4 < admitted <= PREFILL_TOKENS // len(prompt) + 1 and len(scheduler.rows) > 1
    made = sum(isinstance(e, Token) for e in first.events)
    assert made == 3  # its first token at admission, then one per step: not held

