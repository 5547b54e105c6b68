"""lm-evaluation-harness's own `local-completions` backend pointed at gptlab serve scores
the shipped gptlab_next_line task as the `gptlab` backend does: every loglikelihood (echo
+ logprobs over HTTP, the prompt split into tokens by the server's /tokenize, which the
harness finds by itself) within 1e-4, every is_greedy, and acc and acc_norm equal."""

from __future__ import annotations

import pytest

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")  # lm-eval's `api` extra, which its API backends need

from gptlab.harness.shipped import tasks  # noqa: E402

TASK = "gptlab_next_line"


def _responses(result: dict) -> list[tuple[float, bool]]:
    return [(float(r[0]), bool(r[1])) for sample in result["samples"][TASK]
            for [r] in sample["resps"]]


@pytest.mark.slow
def test_local_completions_scores_the_shipped_task_as_the_gptlab_backend(server):
    args = (f"base_url={server}/completions,model=shakespeare,max_length=128,"
            f"num_concurrent=8,max_retries=1")
    theirs = lm_eval.simple_evaluate(model="local-completions", model_args=args, tasks=[TASK],
                                     task_manager=tasks(), log_samples=True)
    ours = lm_eval.simple_evaluate(model="gptlab", model_args="pretrained=shakespeare",
                                   tasks=[TASK], task_manager=tasks(), log_samples=True,
                                   device="cpu")
    a, b = _responses(theirs), _responses(ours)
    assert len(a) == len(b) == 800  # 200 questions, 4 choices
    # a line's summed float32 log-probabilities, here from one prompt per forward, there from
    # padded batches of 32: as tests/harness holds the gptlab backend to the hf one
    assert max(abs(x[0] - y[0]) for x, y in zip(a, b, strict=True)) < 1e-4
    assert [x[1] for x in a] == [y[1] for y in b]
    for metric in ("acc,none", "acc_norm,none"):
        assert theirs["results"][TASK][metric] == ours["results"][TASK][metric]
