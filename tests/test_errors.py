"""Errors a user can cause (gptlab.errors): what each one is to a library caller and which
exit code the CLI gives it."""

import pytest

from gptlab import GPTConfig
from gptlab.errors import ConfigError, GptlabError, Setting, SettingError, UsageError, listed


def test_usage_errors_are_value_errors():
    assert issubclass(UsageError, ValueError) and issubclass(ConfigError, UsageError)
    with pytest.raises(ValueError):
        GPTConfig(n_layer=-1)


def test_exit_codes_say_whose_fault_it_was():
    """A failure exits 1, bad input 2 (README, "Exit codes")."""
    assert GptlabError("disk gone").exit_code == 1
    assert UsageError("bad value").exit_code == ConfigError("bad field").exit_code == 2
    assert not issubclass(GptlabError, ValueError)


def test_a_setting_error_reads_in_the_librarys_spelling_and_in_anyones_words():
    error = SettingError(Setting("warmup_iters"), " (9) must not exceed ", Setting("max_iters"),
                         " (5)")
    assert str(error) == "warmup_iters (9) must not exceed max_iters (5)"
    assert error.settings == ("warmup_iters", "max_iters")
    assert error.said_with({"warmup_iters": "--warmup-iters", "max_iters": "--max-iters"}) == (
        "--warmup-iters (9) must not exceed --max-iters (5)")
    # a setting the words lack keeps its name; text that spells a name is no setting
    assert error.said_with({"warmup_iters": "--warmup-iters"}) == (
        "--warmup-iters (9) must not exceed max_iters (5)")
    assert SettingError("max_iters is text").said_with({"max_iters": "--max-iters"}) == (
        "max_iters is text")
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert issubclass(ConfigError, SettingError)


def test_listed_settings_are_each_a_setting():
    parts = listed(["max_iters", "device", "tp"])
    assert "".join(parts) == "max_iters, device, tp"
    assert SettingError("only ", *parts).said_with({"device": "--device", "tp": "--tp"}) == (
        "only max_iters, --device, --tp")
    assert "".join(listed(["block_size", "rope_scaling"], " and ")) == (
        "block_size and rope_scaling")
    assert listed([]) == ()


def test_the_configs_name_the_setting_they_refuse():
    from gptlab.training.config import TrainConfig

    with pytest.raises(SettingError) as refused:
        TrainConfig(min_lr=1.0, learning_rate=0.5)
    assert refused.value.settings == ("min_lr", "learning_rate")
    with pytest.raises(ConfigError) as refused:
        GPTConfig(n_embd=30, n_head=4)
    assert refused.value.settings == ("n_embd", "n_head")
