"""The bodies of the longer-than-trained view (gptlab.lab.context.schemas): a good body
takes its defaults (the context chosen from the run, the window's last position, the
experiment's results read from the runs folder); a bad one is refused in one line naming
the field, every limit from the schema."""

import pytest

from gptlab.lab.context import schemas


def test_good_bodies_take_their_defaults():
    body = schemas.ContextRequest.model_validate({"run": "r"})
    assert (body.context, body.position, body.rope_scaling, body.text) == (None, None, None, None)
    assert (body.buckets, body.layer, body.head) == (16, 0, 0)
    experiment = schemas.ExperimentRequest.model_validate({"experiment": "ctx"})
    assert (experiment.length, experiment.mode, experiment.shipped) == (
        256, "non-overlapping", False)


@pytest.mark.parametrize("model, body, message", [
    (schemas.ContextRequest, {}, "run is required"),
    (schemas.ContextRequest, {"run": "r", "context": 1}, "context must be between 2 and 1024"),
    (schemas.ContextRequest, {"run": "r", "context": schemas.MAX_CONTEXT + 1}, "context must be"),
    (schemas.ContextRequest, {"run": "r", "rope_scaling": "cubic"}, "rope_scaling"),
    (schemas.ContextRequest, {"run": "r", "buckets": schemas.MAX_BUCKETS + 1}, "buckets must be"),
    (schemas.ContextRequest, {"run": "r", "position": schemas.MAX_CONTEXT},
     "position must be between 0 and 1023"),
    (schemas.ExperimentRequest, {"experiment": ""}, "experiment must not be empty"),
    (schemas.ExperimentRequest, {"experiment": "ctx", "mode": "strided"}, "mode"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)
