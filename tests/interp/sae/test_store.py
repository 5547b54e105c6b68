"""A dictionary on disk (gptlab.interp.sae.store): saved in SAELens' layout it loads back to
the same outputs, a mismatched one is refused, and a folder holding anything else is not
written into."""

from __future__ import annotations

import json

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.sae import store
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.mark.parametrize("site, activation, architecture", [
    ("mlp_out", "topk", "topk"), ("resid_post", "standard", "standard"),
    ("transcoder", "standard", "transcoder"), ("transcoder", "topk", "topk_transcoder"),
])
def test_a_saved_dictionary_loads_back_in_saelens_layout(tmp_path, site, activation,
                                                         architecture):
    config = SAEConfig(d_in=8, d_sae=24, site=site, layer=2, activation=activation, k=3,
                       model_name="tiny")
    sae = SparseAutoencoder(config, torch.Generator().manual_seed(0))
    with torch.no_grad():
        sae.b_enc.normal_()
    store.save(tmp_path, sae, {"tokens": 5})
    cfg = json.loads((tmp_path / store.CFG_FILE).read_text())
    assert cfg["architecture"] == architecture and cfg["d_sae"] == 24
    assert cfg["metadata"]["hook_name"] == ("blocks.2.ln2.hook_normalized"
                                            if site == "transcoder" else f"blocks.2.hook_{site}")
    assert cfg["apply_b_dec_to_input"] == (site != "transcoder")
    loaded, training = store.load(tmp_path)
    x = torch.randn(10, 8)
    assert torch.equal(loaded(x), sae(x).detach()) and training == {"tokens": 5}
    cfg["d_sae"] = 30
    (tmp_path / store.CFG_FILE).write_text(json.dumps(cfg))
    with pytest.raises(UsageError, match="does not match"):
        store.load(tmp_path)
    with pytest.raises(UsageError, match="no trained dictionary"):
        store.load(tmp_path / "absent")


def test_a_folder_holding_other_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a dictionary's"):
        store.check_folder(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        store.check_folder(tmp_path / "file")
