"""Model directories (gptlab.model_dir): round trips, the bare model saved from a
wrapper, and every missing or broken file named. A run's checkpoint: tests/training/
test_rundir.py."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from gptlab import model_dir
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


def tiny(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**dict(vocab_size=17, block_size=8, n_layer=1, n_head=2,
                                   n_embd=8), **kw}))


@pytest.mark.parametrize("tie", [True, False])
def test_model_round_trip(tmp_path, tie):
    model = tiny(tie_embeddings=tie)
    model_dir.save_model(model, tmp_path, metadata={"step": "5"})
    loaded = model_dir.load_model(tmp_path)
    assert loaded.config == model.config and not loaded.training
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if tie:
        assert loaded.lm_head.weight is loaded.wte.weight
    with safe_open(str(tmp_path / "model.safetensors"), framework="numpy") as f:
        metadata = f.metadata()
    assert metadata == {"format": "pt", "step": "5",  # written as given, with the checksum
                        model_dir.CHECKSUM_KEY: model_dir.tensors_sha256(
                            model_dir.weights_state(model))}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_unwrap_saves_the_bare_model(tmp_path):
    model = tiny()
    wrapped = torch.nn.Module()
    wrapped.module = model  # what DistributedDataParallel looks like
    model_dir.save_model(wrapped, tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        assert not any(k.startswith("module.") for k in f.keys())
        assert "lm_head.weight" not in f.keys()  # tied: stored once, as wte


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(UsageError, match="model directory not found"):
        model_dir.load_model(tmp_path / "nope")
    with pytest.raises(UsageError, match="has no config.json"):
        model_dir.load_model(tmp_path)
    model_dir.save_model(tiny(), tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-10])
    with pytest.raises(UsageError, match="not a readable safetensors file"):
        model_dir.load_model(tmp_path)
    weights.write_bytes(data)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "n_layer": 2}))
    with pytest.raises(UsageError, match="does not match its config: missing blocks.1"):
        model_dir.load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UsageError, match="is not valid JSON"):
        model_dir.load_model(tmp_path)
    with pytest.raises(UsageError, match="has no tokenizer.json"):
        model_dir.load_tokenizer_of(tmp_path)


def test_the_checksum_is_of_names_dtypes_shapes_and_bytes():
    state = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2)}
    same = model_dir.tensors_sha256(state)
    assert same == model_dir.tensors_sha256({"b": torch.ones(2), "a": state["a"].clone()})
    changed = [
        {**state, "a": state["a"].reshape(3, 2)},  # the same bytes, another shape
        {**state, "b": torch.ones(2, dtype=torch.float64)},  # the same values, another dtype
        {"c": state["a"], "b": state["b"]},  # renamed
        {**state, "a": state["a"] + torch.tensor([[0, 0, 0], [0, 0, 2.0 ** -20]])},
    ]
    assert len({same, *map(model_dir.tensors_sha256, changed)}) == 1 + len(changed)
    # a view or a transposed copy reads as its values, in its own layout
    assert model_dir.tensors_sha256({"t": state["a"].t()}) == model_dir.tensors_sha256(
        {"t": state["a"].t().contiguous()})


def flip_bit(path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def data_start(path) -> int:
    """Where a safetensors file's tensor data begins: after its 8-byte header length and
    the header (the format's one fact this test needs)."""
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def test_a_flipped_bit_anywhere_in_the_tensors_is_refused_naming_the_file(tmp_path):
    """safetensors checks no checksum of its own: before the recorded one, each of these
    loaded as a model with one weight changed."""
    model_dir.save_model(tiny(), tmp_path)
    weights = tmp_path / "model.safetensors"
    original = weights.read_bytes()
    start, end = data_start(weights), len(original)
    for offset in sorted({start, start + 1, (start + end) // 2, end - 1,
                          *range(start + 3, end, 97)}):
        flip_bit(weights, offset, bit=offset % 8)
        with pytest.raises(UsageError, match=f"{weights} is damaged: its tensors' sha256"):
            model_dir.load_model(tmp_path)
        weights.write_bytes(original)
    model_dir.load_model(tmp_path)  # the file as written loads


def test_weights_written_before_the_checksum_load_as_they_are(tmp_path):
    from safetensors.torch import save_file

    model = tiny()
    model_dir.save_model(model, tmp_path)
    save_file(model_dir.weights_state(model), str(tmp_path / "model.safetensors"),
              metadata={"format": "pt", "step": "3"})  # as an earlier gptlab wrote it
    loaded = model_dir.load_model(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 loaded.state_dict().values(), strict=True))
