"""Errors a user can cause (gptlab.errors): what each one is to a library caller and which
exit code the CLI gives it."""

import pytest

from gptlab import GPTConfig
from gptlab.errors import ConfigError, GptlabError, UsageError


def test_usage_errors_are_value_errors():
    assert issubclass(UsageError, ValueError) and issubclass(ConfigError, UsageError)
    with pytest.raises(ValueError):
        GPTConfig(n_layer=-1)


def test_exit_codes_say_whose_fault_it_was():
    """A failure exits 1, bad input 2 (README, "Exit codes")."""
    assert GptlabError("disk gone").exit_code == 1
    assert UsageError("bad value").exit_code == ConfigError("bad field").exit_code == 2
    assert not issubclass(GptlabError, ValueError)
