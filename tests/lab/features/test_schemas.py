"""The Features view's request bodies (gptlab.lab.features.schemas) hold their limits: a
search's token is 1-32 characters and its count 1-MAX_LISTED, a feature a non-negative
integer, the contexts 1-MAX_CONTEXTS, `by` one of two words; an unknown field is an error,
not ignored."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gptlab.lab.features import schemas as fs


def test_good_bodies_take_their_defaults():
    search = fs.SearchRequest(dictionary="shipped", token="e")
    assert (search.by, search.count) == ("promotes", 12)
    feature = fs.FeatureRequest(dictionary="feat/sae", feature=0)
    assert (feature.text, feature.contexts) == ("", 8)


@pytest.mark.parametrize("model, body", [
    (fs.SearchRequest, {"dictionary": "shipped", "token": ""}),
    (fs.SearchRequest, {"dictionary": "shipped", "token": "x" * 33}),
    (fs.SearchRequest, {"dictionary": "shipped", "token": "e", "by": "likes"}),
    (fs.SearchRequest, {"dictionary": "shipped", "token": "e", "count": fs.MAX_LISTED + 1}),
    (fs.SearchRequest, {"dictionary": "", "token": "e"}),
    (fs.SearchRequest, {"dictionary": "shipped", "token": "e", "k": 3}),
    (fs.FeatureRequest, {"dictionary": "shipped", "feature": -1}),
    (fs.FeatureRequest, {"dictionary": "shipped", "feature": 1.5}),
    (fs.FeatureRequest, {"dictionary": "shipped", "feature": 1, "contexts": 0}),
    (fs.FeatureRequest, {"dictionary": "shipped", "feature": 1,
                         "contexts": fs.MAX_CONTEXTS + 1}),
])
def test_bodies_beyond_their_limits_are_refused(model, body):
    with pytest.raises(ValidationError):
        model.model_validate(body)
