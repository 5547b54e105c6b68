"""SlotCache: rows of different lengths decoded in one forward pass give each row what it
gives alone, whatever the position encoding, through the cache's compaction and growth."""

import pytest
import torch

from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.kv_cache import new_kv_cache
from gptlab.serve.slots import SlotCache

STEPS = 20
VARIANTS = [
    {"pos_encoding": "learned"}, {"pos_encoding": "sinusoidal"}, {"pos_encoding": "rope"},
    {"pos_encoding": "alibi"}, {"pos_encoding": "none"},
    {"pos_encoding": "rope", "qk_norm": True}, {"pos_encoding": "rope", "value_residual": True},
    {"pos_encoding": "learned", "n_kv_head": 1, "n_layer": 4},
]


def staggered(model: GPT, prompts: list[torch.Tensor], capacity: int) -> tuple[dict, SlotCache]:
    """Greedy tokens of each prompt, admitted one every third step into one SlotCache."""
    cache = SlotCache(model.config, len(prompts), capacity=capacity)
    rows: dict[int, int] = {}
    last: dict[int, int] = {}
    out: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    pending, t = list(range(len(prompts))), 0
    while pending or rows:
        if pending and t % 3 == 0:
            i = pending.pop(0)
            kv = new_kv_cache(model, 1, prompts[i].shape[1])
            logits, _ = model(prompts[i], cache=kv)
            rows[i] = cache.add([k[0] for k in kv.keys], [v[0] for v in kv.values])
            last[i] = int(logits[0, -1].argmax())
            out[i].append(last[i])
        t += 1
        if not rows:
            continue
        order = sorted(rows, key=rows.get)
        cache.reserve()
        logits, _ = model(torch.tensor([[last[i]] for i in order]), cache=cache,
                          attention_mask=cache.key_mask())
        for j, i in enumerate(order):
            last[i] = int(logits[j, -1].argmax())
            out[i].append(last[i])
        for i in order:
            if len(out[i]) >= STEPS:
                moved = cache.remove(rows[i])
                if moved is not None:
                    mover = next(q for q in rows if rows[q] == moved)
                    rows[mover] = rows[i]
                del rows[i]
    return out, cache


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(
    f"{k}={v[k]}" for k in v))
@torch.no_grad()
def test_rows_of_different_lengths_decode_as_each_alone(variant):
    torch.manual_seed(0)
    fields = {"vocab_size": 50, "block_size": 64, "n_layer": 2, "n_head": 4, "n_kv_head": 2,
              "n_embd": 32, **variant}
    model = GPT(GPTConfig(**fields)).eval()
    # random weights give near-ties; a sharper head makes argmax decided
    model.lm_head.weight.mul_(20)
    prompts = [torch.randint(50, (1, n)) for n in (3, 9, 5, 1, 12, 7)]
    alone = [model.generate(p, STEPS, temperature=0)[0, p.shape[1]:].tolist() for p in prompts]
    together, cache = staggered(model, prompts, capacity=4)
    assert [together[i] for i in range(len(prompts))] == alone
    assert cache.n == 0 and cache.capacity > 4  # it grew (and compacted on the way)


def test_a_step_writes_one_column_per_row_and_masks_the_padding():
    config = GPTConfig(vocab_size=10, block_size=16, n_layer=1, n_head=1, n_embd=4)
    cache = SlotCache(config, 3, capacity=8)
    ones = [torch.ones(1, 5, 4)]
    assert cache.add(ones, ones) == 0
    assert cache.add([torch.full((1, 2, 4), 2.0)], [torch.full((1, 2, 4), 2.0)]) == 1
    assert cache.cursor == 5 and cache.length == 5
    assert cache.positions(1).tolist() == [[5], [2]]
    assert cache.key_mask().tolist() == [[True] * 6, [False] * 3 + [True] * 3]
    keys, _ = cache.update(0, torch.full((2, 1, 1, 4), 9.0), torch.zeros(2, 1, 1, 4))
    assert keys.shape == (2, 1, 6, 4) and keys[:, 0, -1, 0].tolist() == [9.0, 9.0]
    cache.advance(1)
    assert cache.lengths == [6, 3]
    assert cache.remove(0) == 1  # the last row moved into row 0
    assert cache.lengths == [3] and cache.length == 3
    assert cache.keys[0][0, 0, cache.cursor - 3:cache.cursor, 0].tolist() == [2.0, 2.0, 9.0]
    with pytest.raises(ValueError, match="one token for each"):
        cache.update(0, torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4))
