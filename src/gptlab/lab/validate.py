"""Checks for the JSON the page sends. Each failure is a UsageError with one line that
names the field, which the server answers as 400: bad input never reaches torch."""

from __future__ import annotations

import math
from typing import Any

from gptlab.errors import UsageError

MAX_TOKENS = 64  # tokens in the attention calculator, and prompt tokens shown for a model
MAX_DIM = 64  # d_model / d_k of the calculator
MAX_TOKEN_CHARS = 32
MAX_ABS_VALUE = 1e6  # an edited cell; keeps exp() and the display finite


def integer(body: dict[str, Any], name: str, lo: int, hi: int, default: int | None = None) -> int:
    value = body.get(name, default)
    if value is None:
        raise UsageError(f"{name} is required")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise UsageError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise UsageError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def number(body: dict[str, Any], name: str, lo: float, hi: float, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise UsageError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{name} must be a finite number, got {value!r}")
    if not lo <= value <= hi:
        raise UsageError(f"{name} must be between {lo:g} and {hi:g}, got {value:g}")
    return float(value)


def boolean(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return value


def text(body: dict[str, Any], name: str, max_chars: int, default: str | None = None) -> str:
    value = body.get(name, default)
    if value is None:
        raise UsageError(f"{name} is required")
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise UsageError(f"{name} is {len(value)} characters long; the limit is {max_chars}")
    return value


def tokens(value: Any) -> list[str]:
    """A whitespace-separated string or a list of strings -> 1..MAX_TOKENS tokens."""
    if isinstance(value, str):
        if len(value) > MAX_TOKENS * (MAX_TOKEN_CHARS + 1):
            raise UsageError(f"tokens: at most {MAX_TOKENS} tokens are allowed")
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise UsageError("tokens must be a string or a list of strings")
    value = [t.strip() for t in value]
    if not value or any(not t for t in value):
        raise UsageError("tokens: give at least one token, none of them empty")
    if len(value) > MAX_TOKENS:
        raise UsageError(f"tokens: {len(value)} given; at most {MAX_TOKENS} are allowed")
    too_long = [t for t in value if len(t) > MAX_TOKEN_CHARS]
    if too_long:
        raise UsageError(f"token {too_long[0][:40]!r} is longer than {MAX_TOKEN_CHARS} characters")
    return value


def matrix(value: Any, name: str, rows: int, cols: int) -> list[list[float]]:
    """A rows x cols list of lists of finite numbers."""
    if (not isinstance(value, list) or len(value) != rows
            or any(not isinstance(r, list) or len(r) != cols for r in value)):
        raise UsageError(f"{name} must be a {rows} x {cols} matrix (a list of {rows} rows)")
    for i, row in enumerate(value):
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise UsageError(f"{name}[{i}][{j}] must be a finite number, got {v!r}")
            if abs(v) > MAX_ABS_VALUE:
                raise UsageError(f"{name}[{i}][{j}] = {v:g} is beyond +-{MAX_ABS_VALUE:g}")
    return [[float(v) for v in row] for row in value]
