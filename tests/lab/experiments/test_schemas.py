"""The bodies of the experiments view and of the quick runs (gptlab.lab.experiments.schemas):
a report reads the runs folder's results unless `shipped`; a quick run takes one of the
catalog's experiments, at the command's default seed unless given; a bad body is refused in
one line naming the field."""

import pytest

from gptlab.experiments import catalog
from gptlab.lab.experiments import quickrun, schemas


def test_good_bodies_take_their_defaults():
    assert schemas.ReportRequest.model_validate({"experiment": "norm"}).shipped is False
    quick = schemas.QuickRequest.model_validate({"experiment": catalog.NAMES[0]})
    assert quick.seed == quickrun.SEED == 1337


@pytest.mark.parametrize("model, body, message", [
    (schemas.ReportRequest, {}, "experiment is required"),
    (schemas.ReportRequest, {"experiment": ""}, "experiment must not be empty"),
    (schemas.ReportRequest, {"experiment": "norm", "shipped": "yes"}, "shipped must be"),
    (schemas.QuickRequest, {"experiment": "nope"}, "experiment"),
    (schemas.QuickRequest, {"experiment": "norm", "seed": -1}, "seed must be between 0"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)
