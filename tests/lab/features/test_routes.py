"""The routes of the Features view (gptlab.lab.features.routes): the paths the app serves
for it, each checking its body; what they answer is tested with the computation
(test_dictionary.py)."""

from gptlab.lab.features.routes import router


def test_the_router_holds_the_features_views_paths(client, served):
    assert served(router, client) == {
        ("/api/features/dictionaries", "get"), ("/api/features/search", "post"),
        ("/api/features/feature", "post")}
