"""The body and status of the watch-it-learn view (gptlab.lab.live.schemas): a start is
taken with its defaults, a bad one refused in one line naming the field (every <= steps
too), by the model and by the server (400, nothing started)."""

import pytest
from fastapi.testclient import TestClient

from gptlab.lab.live import schemas
from gptlab.lab.server import create_app


def test_a_start_is_taken_with_its_defaults():
    start = schemas.LiveStartRequest.model_validate({})
    assert (start.task, start.steps, start.every, start.seed) == ("induction", 1500, 25, 1337)
    assert schemas.LiveStartRequest.model_validate({"steps": 10, "every": 10}).every == 10
    assert set(schemas.LIVE_TASKS) == {"induction", "shakespeare"}


@pytest.mark.parametrize("body, message", [
    ({"task": "poetry"}, "unknown task 'poetry'; expected one of: 'induction' or 'shakespeare'"),
    ({"steps": 9}, "steps must be between 10 and 5000, got 9"),
    ({"steps": schemas.MAX_LIVE_STEPS + 1}, "steps must be between 10 and 5000"),
    ({"every": 4}, "every must be between 5 and 1000, got 4"),
    ({"steps": 10, "every": 20}, "every (20) must not exceed steps (10)"),
    ({"seed": "1"}, "seed must be an integer, got '1'"),
])
def test_a_bad_start_is_refused_in_one_line_naming_the_field(body, message, invalid):
    assert message in invalid(schemas.LiveStartRequest, body)


def test_the_server_answers_a_bad_start_with_400_and_starts_nothing(tmp_path, bad):
    app = create_app(tmp_path)
    bad(TestClient(app), "/api/live/start", {"steps": 10, "every": 20}, "must not exceed")
    assert app.state.live.session is None


def test_the_status_names_the_run_and_task_or_none():
    idle = schemas.LiveStatus(running=False, run=None, task=None, step=0, steps=0)
    assert idle.model_dump() == {"running": False, "run": None, "task": None, "step": 0,
                                 "steps": 0}
    with pytest.raises(ValueError, match="task"):
        schemas.LiveStatus(running=True, run="live", task="poetry", step=1, steps=2)
