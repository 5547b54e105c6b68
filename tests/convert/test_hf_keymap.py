"""Where each of our weights lives in a Hugging Face checkpoint (gptlab.convert.hf_keymap):
every name maps one way and back (no two of ours share one of theirs), every weight of a
model of ours has its name, and the lists beside the maps name weights the map has."""

from __future__ import annotations

import pytest

from gptlab import GPT, GPTConfig
from gptlab.convert.hf_keymap import GPT2, KEYMAPS, LLAMA, KeyMap


def theirs(keymap: KeyMap, blocks: int) -> dict[str, tuple[str, ...]]:
    """Every one of our names, top and inside `blocks` blocks, to the names they use."""
    names = {ours: (name,) for ours, name in keymap.top.items()}
    for i in range(blocks):
        prefix = keymap.base_prefix + keymap.block_prefix.format(i=i)
        names.update({f"blocks.{i}.{ours}": tuple(prefix + n for n in their)
                      for ours, their in keymap.block.items()})
    return names


@pytest.mark.parametrize("keymap", list(KEYMAPS.values()), ids=list(KEYMAPS))
def test_names_map_both_ways(keymap):
    names = theirs(keymap, blocks=3)
    back = {name: ours for ours, their in names.items() for name in their}
    assert len(back) == sum(len(their) for their in names.values())  # none shared
    assert {back[name] for their in names.values() for name in their} == set(names)
    for ours, their in names.items():  # the round trip: ours -> theirs -> ours
        assert {back[name] for name in their} == {ours}
    assert all(name.startswith(keymap.base_prefix) or name == keymap.top["lm_head.weight"]
               for their in names.values() for name in their)


@pytest.mark.parametrize("keymap", list(KEYMAPS.values()), ids=list(KEYMAPS))
def test_the_lists_beside_the_map_name_weights_it_has(keymap):
    assert keymap.transposed <= keymap.block.keys()
    assert keymap.head_interleaved <= keymap.block.keys()
    assert keymap.always_present <= keymap.top.keys() | keymap.block.keys()
    assert KEYMAPS[keymap.model_type] is keymap
    assert keymap.architecture.endswith("ForCausalLM") or keymap.architecture.endswith(
        "LMHeadModel")


@pytest.mark.parametrize("preset, keymap", [("tiny-gpt2", GPT2), ("tiny-llama", LLAMA)])
def test_every_weight_of_a_model_has_a_name(preset, keymap):
    model = GPT(GPTConfig.from_preset(preset))
    names = theirs(keymap, blocks=model.config.n_layer)
    ours = set(model.state_dict())
    assert ours <= set(names), sorted(ours - set(names))


def test_only_opt_keeps_rows_before_position_zero():
    assert {name: m.position_offset for name, m in KEYMAPS.items()} == {
        "gpt2": 0, "llama": 0, "gpt_neox": 0, "opt": 2}
