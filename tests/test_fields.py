"""Checks for plain-data settings (gptlab.fields): every check refuses a bad value with one
line that names the field and says what it must be; bools are no numbers, NaN and the
infinities are named as such; from_dict takes a dict of a dataclass's init fields only."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from gptlab.errors import GptlabError, Setting, SettingError, UsageError
from gptlab.fields import (
    at_least,
    from_dict,
    is_int,
    is_number,
    one_of,
    require,
    within,
)


def refusal(check, value, name: str = "batch_size") -> str:
    with pytest.raises(UsageError) as error:
        check.apply(name, value)
    message = str(error.value)
    assert message.startswith(f"{name} must be ") and "\n" not in message, message
    return message


def test_ints_and_numbers_are_not_bools_and_numbers_are_finite():
    assert is_int(3) and is_int(10**30) and not is_int(True) and not is_int(3.0)
    assert is_number(2.5) and is_number(-7) and is_number(10**400)
    for value in (True, False, math.nan, math.inf, -math.inf, "1", None):
        assert not is_number(value), value


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "4", None])
def test_at_least_refuses_what_is_not_an_integer_that_high(value):
    assert refusal(at_least(1), value) == "batch_size must be an integer >= 1"


def test_at_least_takes_the_bound_and_above():
    for value in (1, 2, 10**12):
        at_least(1).apply("batch_size", value)


@pytest.mark.parametrize("check, good, bad, what", [
    (within(0, 1), [0, 0.5, 1], [-0.01, 1.01, "0.5", True], "in [0, 1]"),
    (within(0, 1, low_open=True), [1e-9, 1], [0], "in (0, 1]"),
    (within(0, 1, high_open=True), [0], [1], "in [0, 1)"),
    (within(0.0, None, low_open=True), [1e-12, 1e12], [0.0, -1], "> 0.0"),
    (within(2, None), [2, 3.5], [1.99], ">= 2"),
])
def test_within_says_the_interval_in_its_refusal(check, good, bad, what):
    for value in good:
        check.apply("dropout", value)
    for value in bad:
        assert refusal(check, value, "dropout") == f"dropout must be {what}"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_number_check_names_nan_and_the_infinities(value):
    assert refusal(within(0, None), value, "lr") == f"lr must be a finite number, got {value}"


def test_one_of_lists_the_choices():
    check = one_of(("adamw", "muon"))
    check.apply("optimizer", "muon")
    assert refusal(check, "sgd", "optimizer") == "optimizer must be one of adamw, muon"


def test_require_raises_a_setting_error_naming_its_settings():
    require("n_head", True, "is fine")
    with pytest.raises(SettingError, match="^n_head must divide n_embd$") as refused:
        require("n_head", False, "must divide ", Setting("n_embd"))
    assert refused.value.settings == ("n_head", "n_embd")


@dataclass
class Settings:
    steps: int = 1
    name: str = "a"
    derived: list = field(default_factory=list, init=False)


def test_from_dict_builds_the_dataclass_from_its_init_fields():
    assert from_dict(Settings, {"steps": 3}, "config", "config field") == Settings(steps=3)
    with pytest.raises(UsageError, match=r"^config must be a JSON object, got list$"):
        from_dict(Settings, [1], "config", "config field")
    with pytest.raises(UsageError, match=r"^unknown config field\(s\): derived, zeta$"):
        from_dict(Settings, {"zeta": 1, "derived": [], "steps": 2}, "config", "config field")
    with pytest.raises(GptlabError, match="unknown entry"):
        from_dict(Settings, {"x": 1}, "it", "entry", error=GptlabError)
