"""The routes of the views that need no run (gptlab.lab.calculator_routes): the paths the
app serves for them, each checking its body; presets and a quiz round trip answered."""

from gptlab.lab.calculator_routes import router


def test_the_router_holds_the_calculators_paths(client, served):
    assert served(router, client) == {
        ("/api/attention", "post"), ("/api/scaling", "post"), ("/api/sinusoidal", "post"),
        ("/api/rope", "post"), ("/api/params", "post"), ("/api/presets", "get"),
        ("/api/quiz", "post"), ("/api/quiz/check", "post")}


def test_presets_and_a_quiz_round_trip(client, post):
    presets = client.get("/api/presets").json()
    assert "gpt2" in presets["presets"]
    question = post(client, "/api/quiz", {"kind": "row0", "seed": 3})
    assert "answer" not in question  # it stays on the server
    checked = post(client, "/api/quiz/check", {"kind": "row0", "seed": 3, "answer": "no"})
    assert checked["correct"] is False
