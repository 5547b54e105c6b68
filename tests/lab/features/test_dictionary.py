"""The Features view's API (gptlab.lab.features.routes) over a runs folder holding a
features experiment whose autoencoder reads the shipped model: every number it sends is
recomputed here in float64 (the model and the dictionary in double precision, each
position's context run alone): logit effects, search scores, top contexts, the activation
along a typed text; bad requests get one line."""

from __future__ import annotations

import copy

import pytest
import torch
from fastapi.testclient import TestClient

from gptlab import load
from gptlab.experiments.grid import experiment_folder
from gptlab.files.atomic import write_json
from gptlab.interp.sae import store
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig
from gptlab.interp.sae.sites import read_site
from gptlab.lab.context.window import shakespeare_val
from gptlab.lab.features import dictionary, routes
from gptlab.lab.server import create_app

NAME = "feat/sae"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    folder = experiment_folder(root / "feat", "features")
    write_json(folder / "results.json", {"experiment": "features"})
    sae = SparseAutoencoder(SAEConfig(d_in=192, d_sae=48, site="mlp_out", layer=2, k=4,
                                      model_name="shakespeare"),
                            torch.Generator().manual_seed(0))
    with torch.no_grad():
        sae.b_enc.fill_(0.3)
    store.save(folder / "sae", sae, {})
    return TestClient(create_app(root)), store.load(folder / "sae")[0]


@pytest.fixture(scope="module")
def double():
    """The shipped model in float64."""
    model, tokenizer = load("shakespeare")
    return copy.deepcopy(model).double(), tokenizer


def alone(model, sae, ids, layer=2):
    """The features at the last position of ids run alone, float64."""
    x, _ = read_site(model, torch.tensor(ids), "mlp_out", layer)
    return sae.double().encode(x[0, -1].double())


def test_the_dictionaries_are_listed(lab, served):
    client, _ = lab
    assert served(routes.router, client) == {
        ("/api/features/dictionaries", "get"), ("/api/features/search", "post"),
        ("/api/features/feature", "post")}
    found = {d["name"]: d for d in client.get("/api/features/dictionaries").json()
             ["dictionaries"]}
    shipped = found["shipped"]  # the default run's autoencoder, beside its results
    assert list(found)[0] == "shipped" and shipped["label"].startswith("shipped results")
    assert shipped["model"] == "shakespeare" and shipped["d_sae"] == 1536
    assert shipped["k"] == 16 and shipped["site"] == "mlp_out" and shipped["layer"] == 3
    mine = found[NAME]
    assert mine["model"] == "shakespeare" and mine["layer"] == 2 and mine["d_sae"] == 48
    assert mine["hook_name"] == "blocks.2.hook_mlp_out" and mine["k"] == 4


def test_promoting_features_are_the_largest_logit_effects_in_float64(lab, double, post):
    client, sae = lab
    model, tokenizer = double
    d = post(client, "/api/features/search", {"dictionary": NAME, "token": "e", "count": 5})
    e = tokenizer.encode("e")[0]
    effects = (model.lm_head.weight @ (model.ln_f.weight * sae.W_dec.double()).T)[e]  # (48,)
    expected = effects.topk(5)
    assert [f["feature"] for f in d["features"]] == expected.indices.tolist()
    assert [f["score"] for f in d["features"]] == pytest.approx(expected.values.tolist(),
                                                                rel=1e-9)


def test_firing_features_and_a_features_contexts_recompute_alone(lab, double, post):
    client, sae = lab
    model, tokenizer = double
    d = post(client, "/api/features/search", {"dictionary": NAME, "token": "q",
                                              "by": "fires", "count": 3})
    text = shakespeare_val()[: dictionary.REFERENCE_CHARS]
    ids = tokenizer.encode(text)
    feature = d["features"][0]["feature"]
    f = post(client, "/api/features/feature", {"dictionary": NAME, "feature": feature,
                                               "contexts": 4})
    assert len(f["contexts"]) == 4
    for c in f["contexts"]:
        context = ids[c["start"]: c["position"] + 1]
        assert float(alone(model, sae, context)[feature]) == pytest.approx(c["activation"],
                                                                          rel=1e-4)
        assert c["ids"] == context[-len(c["ids"]):] and c["token"] == text[c["position"]]
    # "fires": the mean activation over the text's q's, each read in the window that takes
    # it (windows of 128 overlapping by half: from 64 * ((p - 64) // 64) past the first)
    q = [p for p, t in enumerate(ids) if t == tokenizer.encode("q")[0]]
    assert 0 < len(q) < 40 and max(q) < len(ids) - 128
    starts = [0 if p < 128 else 64 * ((p - 64) // 64) for p in q]
    mean = sum(float(alone(model, sae, ids[s: p + 1])[feature])
               for s, p in zip(starts, q, strict=True)) / len(q)
    assert d["features"][0]["score"] == pytest.approx(mean, rel=1e-4)
    with torch.no_grad():
        promoted = model.lm_head.weight @ (model.ln_f.weight * sae.W_dec[feature].double())
    assert f["promoted"][0]["id"] == int(promoted.argmax())
    assert f["promoted"][0]["logit"] == pytest.approx(float(promoted.max()), rel=1e-9)
    assert sum(f["histogram"]["counts"]) == round(f["density"] * len(ids))


def test_a_feature_along_a_typed_text_is_each_prefix_alone(lab, double, post):
    client, sae = lab
    model, tokenizer = double
    text = "To be, or not to be"
    f = post(client, "/api/features/feature", {"dictionary": NAME, "feature": 7,
                                               "text": text})
    ids = tokenizer.encode(text)
    assert [t["token"] for t in f["along"]] == list(text)
    for i, t in enumerate(f["along"]):
        assert t["activation"] == pytest.approx(float(alone(model, sae, ids[: i + 1])[7]),
                                                rel=1e-4, abs=1e-5)
    short = post(client, "/api/features/feature", {"dictionary": NAME, "feature": 7,
                                                   "text": "T"})
    assert len(short["along"]) == 1


def test_the_shipped_dictionary_opens_on_the_shipped_model(lab, double, post):
    client, _ = lab
    d = post(client, "/api/features/search", {"dictionary": "shipped", "token": "q",
                                              "by": "fires", "count": 3})
    f = post(client, "/api/features/feature", {"dictionary": "shipped",
                                               "feature": d["features"][0]["feature"],
                                               "text": "quick"})
    assert f["d_sae"] == 1536 and f["contexts"] and len(f["along"]) == 5
    shown = [c["activation"] for c in f["contexts"]]
    assert shown == sorted(shown, reverse=True) and shown[0] > 0
    model, tokenizer = double
    sae = store.load(dictionary.SHIPPED_FOLDER)[0]
    ids = tokenizer.encode("quick")
    feature = d["features"][0]["feature"]
    for i, t in enumerate(f["along"]):
        x, _ = read_site(model, torch.tensor(ids[: i + 1]), "mlp_out", 3)
        expected = float(sae.double().encode(x[0, -1].double())[feature])
        assert t["activation"] == pytest.approx(expected, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("path, body, fragment", [
    ("/api/features/search", {"dictionary": "nope/sae", "token": "e"}, "no dictionary"),
    ("/api/features/search", {"dictionary": NAME, "token": "ee"}, "not one"),
    ("/api/features/search", {"dictionary": NAME, "token": "é"}, "not in the vocabulary"),
    ("/api/features/feature", {"dictionary": NAME, "feature": 48}, "out of range"),
    ("/api/features/feature", {"dictionary": "../x/sae", "feature": 1}, "dictionary"),
])
def test_bad_requests_are_one_line(lab, bad, path, body, fragment):
    client, _ = lab
    bad(client, path, body, fragment)
