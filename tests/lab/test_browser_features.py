"""View 15 (features) in real headless Chromium (the session's browser), over a runs folder
holding a features experiment whose autoencoder reads the shipped model: the page lists
the dictionary, searches features by token, opens one with its contexts (the firing
character marked), its logit effects and its activation along the typed text, each number
the API's."""

from __future__ import annotations

import pytest
import torch

from gptlab.experiments.grid import experiment_folder
from gptlab.files.atomic import write_json
from gptlab.interp.sae import store
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig
from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]
NAME = "feat/sae"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, open_lab):
    root = tmp_path_factory.mktemp("feature-runs")
    folder = experiment_folder(root / "feat", "features")
    write_json(folder / "results.json", {"experiment": "features"})
    sae = SparseAutoencoder(SAEConfig(d_in=192, d_sae=48, site="mlp_out", layer=2, k=4,
                                      model_name="shakespeare"),
                            torch.Generator().manual_seed(0))
    store.save(folder / "sae", sae, {})
    with BackgroundServer(root) as url:
        with open_lab(f"{url}#features", "[data-testid=feat-along-token]",
                      viewport={"width": 1280, "height": 900}) as opened:
            yield opened.page


def api(page, path, body):
    return page.evaluate("([p, b]) => fetch(p, {method: 'POST', headers: {'Content-Type': "
                         "'application/json'}, body: JSON.stringify(b)}).then(r => r.json())",
                         [path, body])


def test_the_dictionary_is_listed_and_a_search_lists_the_apis_features(lab, settle):
    settle(lab)
    lab.select_option("[data-testid=feat-dictionary]", NAME)
    lab.fill("[data-testid=feat-token]", "t")
    lab.select_option("[data-testid=feat-by]", "promotes")
    lab.click("[data-testid=feat-search]")
    settle(lab)
    shown = lab.eval_on_selector_all("[data-testid=feat-listed]",
                                     "bs => bs.map(b => +b.dataset.feature)")
    expected = api(lab, "/api/features/search", {"dictionary": NAME, "token": "t",
                                                 "by": "promotes", "count": 12})
    assert shown == [f["feature"] for f in expected["features"]]


def test_a_feature_opens_with_its_contexts_logits_and_the_typed_text(lab, settle):
    lab.select_option("[data-testid=feat-dictionary]", NAME)
    lab.click("[data-testid=feat-listed] >> nth=1")
    settle(lab)
    feature = int(lab.input_value("[data-testid=feat-feature]"))
    text = lab.input_value("[data-testid=feat-text]")
    d = api(lab, "/api/features/feature", {"dictionary": NAME, "feature": feature,
                                           "text": text, "contexts": 8})
    contexts = lab.eval_on_selector_all("[data-testid=feat-context]",
                                        "ls => ls.map(l => +l.dataset.activation)")
    assert contexts == pytest.approx([c["activation"] for c in d["contexts"]])
    marks = lab.eval_on_selector_all("[data-testid=feat-context] mark",
                                     "ms => ms.map(m => m.textContent)")
    assert marks == [c["token"].replace(" ", "\u2423").replace("\n", "\\n")
                     for c in d["contexts"]]
    promoted = lab.eval_on_selector_all("[data-testid=feat-promoted-item]",
                                        "ls => ls.map(l => +l.dataset.id)")
    assert promoted == [t["id"] for t in d["promoted"]]
    along = lab.eval_on_selector_all("[data-testid=feat-along-token]",
                                     "ss => ss.map(s => [s.textContent, +s.dataset.activation])")
    assert [a[0] for a in along] == list(text)
    assert [a[1] for a in along] == pytest.approx([t["activation"] for t in d["along"]])
    assert f"feature {feature} of 48" in lab.text_content("[data-testid=feat-summary]")


def test_a_bad_token_shows_one_line(lab, settle):
    lab.fill("[data-testid=feat-token]", "zz")
    lab.click("[data-testid=feat-search]")
    settle(lab)
    assert "not one" in lab.text_content("[data-testid=error]")
    assert lab.eval_on_selector_all("[data-testid=feat-listed]", "bs => bs.length") == 0
