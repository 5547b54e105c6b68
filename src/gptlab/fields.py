"""Checks for plain-data settings, shared by the config dataclasses (GPTConfig, TrainConfig).

Every message names the field and says what it must be ("batch_size must be an integer
>= 1"), never a CLI flag: the field is a Setting of a SettingError, which the CLI says as
its flag.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gptlab.errors import Setting, SettingError, UsageError

T = TypeVar("T")


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> bool:
    """An int (of any size) or a finite float; not a bool (JSON's true is no number), NaN
    or an infinity."""
    return is_int(v) or (isinstance(v, float) and math.isfinite(v))


def require(name: str, ok: bool, *what: str) -> None:
    """A SettingError "NAME what" unless ok; what: parts of a SettingError (text, and
    Settings where it names another setting)."""
    if not ok:
        raise SettingError(Setting(name), " ", *what)


@dataclass(frozen=True)
class Check:
    """A test of one field's value and what the value must be, in words."""

    test: Callable[[Any], bool]
    what: str  # completes "NAME must be ..."
    number: bool = False  # a finite number is wanted: NaN and infinities are named as such

    def apply(self, name: str, value: Any) -> None:
        if (not self.test(value) and self.number and isinstance(value, float)
                and not math.isfinite(value)):
            raise SettingError(Setting(name), f" must be a finite number, got {value}")
        require(name, self.test(value), f"must be {self.what}")


def at_least(low: int) -> Check:
    return Check(lambda v: is_int(v) and v >= low, f"an integer >= {low}")


def within(low: float, high: float | None, *, low_open: bool = False,
           high_open: bool = False) -> Check:
    """A finite number in an interval; high None: no upper bound."""
    def test(v: Any) -> bool:
        if not is_number(v):
            return False
        above = v > low if low_open else v >= low
        below = high is None or (v < high if high_open else v <= high)
        return above and below

    if high is None:
        what = f"> {low}" if low_open else f">= {low}"
    else:
        what = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return Check(test, what, number=True)


def one_of(choices: tuple[str, ...]) -> Check:
    return Check(lambda v: v in choices, f"one of {', '.join(choices)}")


def without_retired(d: Any, retired: dict[str, Any], what: str,
                    error: type[Exception] = UsageError) -> Any:
    """d without the retired settings that hold the value that made them do nothing, so a
    file saved before they were removed still loads and means what it meant; one that
    used a retired setting is refused, naming it (the run's results stand, but this
    gptlab no longer computes what it asked for)."""
    if not isinstance(d, dict):
        return d
    used = sorted(k for k, off in retired.items() if k in d and d[k] != off)
    if used:
        settings = ", ".join(f"{k}={d[k]!r}" for k in used)
        raise error(f"this {what} uses {settings}: a speedrun option gptlab no longer "
                         f"has (BENCHMARKS.md records why it was not adopted)")
    return {k: v for k, v in d.items() if k not in retired}


def from_dict(cls: type[T], d: Any, what: str, entry: str,
              error: type[Exception] = UsageError) -> T:
    """cls(**d) for a dataclass, refusing anything but a dict of its init fields; `what`
    names the whole in messages ("config"), `entry` one field ("config field")."""
    if not isinstance(d, dict):
        raise error(f"{what} must be a JSON object, got {type(d).__name__}")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(d) - known)
    if unknown:
        raise error(f"unknown {entry}(s): {', '.join(unknown)}")
    return cls(**d)
