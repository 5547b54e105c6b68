"""The routes of the views that need no run (gptlab.lab.calculator.routes): the paths the
app serves for them, each checking its body; presets and a quiz round trip answered."""

from gptlab.lab.calculator.routes import router

VIEWS = ("attention", "scaling", "sinusoidal", "rope", "params", "quiz", "quiz/check")


def test_the_router_holds_the_calculators_paths(client, served):
    posted = {(f"/api/{view}", "post") for view in VIEWS}
    assert served(router, client) == posted | {("/api/presets", "get")}


def test_presets_and_a_quiz_round_trip(client, post):
    presets = client.get("/api/presets").json()
    assert "gpt2" in presets["presets"]
    question = post(client, "/api/quiz", {"kind": "row0", "seed": 3})
    assert "answer" not in question  # it stays on the server
    checked = post(client, "/api/quiz/check", {"kind": "row0", "seed": 3, "answer": "no"})
    assert checked["correct"] is False
