"""What every request body of the lab shares: its field types and limits, and the one line
a failed check becomes. Each area's own bodies and answers are in its schemas module
(gptlab.lab.calculator.schemas, gptlab.lab.model.schemas, and so on), built from these
types; the answers' shared parts are gptlab.lab.responses.

FastAPI checks every request body against its model before a view runs, so bad input
never reaches torch, and the same models are the requests' half of the OpenAPI schema
(/openapi.json) that tests/lab/test_fuzz.py fuzzes. Every limit lives in the schema: a
request can ask for at most 64 tokens, a 4096-wide d_k, a 256 x 256 table.

Scalars are strict (an integer field takes a JSON integer, not "4", 4.5 or true; 4.0 counts,
as in JSON Schema), so what the schema promises is exactly what the server accepts. A
failed check becomes one line naming the field (`one_line`), which the server answers as
400 {"error": line}.
"""

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)
from pydantic_core import PydanticCustomError

from gptlab.fields import is_number

MAX_TOKENS = 64  # tokens in the attention calculator, and prompt tokens shown for a model
MAX_DIM = 64  # d_model / d_k of the calculator
MAX_TOKEN_CHARS = 32
MAX_ABS_VALUE = 1e6  # an edited cell; keeps exp() and the display finite
MAX_SEED = 2**31 - 1
MAX_PROMPT_CHARS = 4000
MAX_RUN_CHARS = 500
MAX_ANSWER_CHARS = 500
MAX_CONFIG_INT = 10**7  # any GPTConfig size (llama2-70b's largest is 32000 x 8192)


# ----------------------------------------------------------------------------- field types


def fmt_num(x: float) -> str:
    """A number for a message: floats as %g, long integers cut."""
    if isinstance(x, float):
        return f"{x:g}"
    text = str(x)
    return text if len(text) <= 20 else f"{text[:12]}... ({len(text)} digits)"


def _range(lo: float, hi: float, *, even: bool = False) -> BeforeValidator:
    """'must be between lo and hi' naming both ends (pydantic's own message names one)."""
    def check(value: object) -> object:
        if is_number(value) and not lo <= value <= hi:
            raise PydanticCustomError(
                "range", "must be between {lo} and {hi}, got {value}",
                {"lo": fmt_num(lo), "hi": fmt_num(hi), "value": fmt_num(value)})
        if even and isinstance(value, int) and not isinstance(value, bool) and value % 2:
            raise PydanticCustomError("even", "must be even (RoPE rotates pairs), got {value}",
                                      {"value": value})
        return value
    return BeforeValidator(check)


def _integral(value: object) -> object:
    """JSON Schema counts 4.0 as an integer, so the server does too (but not 4.5 or "4")."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(_integral)]


def _int(lo: int, hi: int, description: str | None = None, *, even: bool = False) -> Any:
    return Annotated[int, Field(ge=lo, le=hi, multiple_of=2 if even else None,
                                description=description),
                     _range(lo, hi, even=even), BeforeValidator(_integral)]


def _float(lo: float, hi: float, description: str | None = None) -> Any:
    return Annotated[float, Field(ge=lo, le=hi, allow_inf_nan=False, description=description),
                     _range(lo, hi)]


def _unicode(name: str, value: str) -> str:
    """JSON can carry a lone surrogate (\\ud800) that no UTF-8 text holds. pydantic refuses
    it in a str field; a value checked before pydantic sees it is checked here."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode text (it holds a lone surrogate)"
                         ) from None
    return value


def _text(max_length: int, description: str, min_length: int | None = None) -> Any:
    return Annotated[str, Field(min_length=min_length, max_length=max_length,
                                description=description)]


def _cell(value: object) -> object:
    if is_number(value) and abs(value) > MAX_ABS_VALUE:
        raise PydanticCustomError("beyond", "= {value} is beyond +-{limit}",
                                  {"value": fmt_num(value), "limit": fmt_num(MAX_ABS_VALUE)})
    return value


Seed = _int(0, MAX_SEED, "seeds the random draws")
Cell = Annotated[float, Field(ge=-MAX_ABS_VALUE, le=MAX_ABS_VALUE, allow_inf_nan=False),
                 BeforeValidator(_cell)]
Row = Annotated[list[Cell], Field(min_length=1, max_length=MAX_TOKENS)]
InMatrix = Annotated[list[Row], Field(min_length=1, max_length=MAX_TOKENS)]
Token = Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_CHARS)]
TokenId = Annotated[Integer, Field(ge=0)]
Ids = Annotated[list[TokenId], Field(min_length=1, max_length=MAX_TOKENS,
                                     description="token ids, e.g. a probe sent back")]
RunName = _text(MAX_RUN_CHARS, "a run's path inside the runs folder, e.g. 'tiny'", min_length=1)
Prompt = _text(MAX_PROMPT_CHARS, "text the run's tokenizer encodes")
SHIPPED = Field(False, description="experiment names an experiment (context, norm, ...) "
                                   "whose shipped results are read, not a folder")


class Body(BaseModel):
    """A request body: strict scalars; a field it does not know is an error, not ignored
    (a misspelt or stale field such as {"masked": false} would otherwise leave its default
    in force and answer a question nobody asked)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class Closed(BaseModel):
    """A nested object whose fields are all known: an unknown one is an error."""

    model_config = ConfigDict(strict=True, extra="forbid")


# ----------------------------------------------------------------------------- requests


# ----------------------------------------------------------------------------- errors


def _where(loc: tuple[Any, ...]) -> str:
    """('body', 'x', 1, 2) -> 'x[1][2]'; ('body', 'config', 'n_head') -> 'config.n_head'."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


PHRASES = {
    "missing": "is required",
    "int_type": "must be an integer, got {input}",
    "float_type": "must be a finite number, got {input}",
    "finite_number": "must be a finite number, got {input}",
    "bool_type": "must be true or false, got {input}",
    "string_type": "must be a string, got {input}",
    "list_type": "must be a list, got {input}",
    "model_type": "must be a JSON object, got {input}",
    "model_attributes_type": "must be a JSON object, got {input}",
    "dict_type": "must be a JSON object, got {input}",
    "string_too_long": "is {length} characters long; the limit is {max_length}",
    "string_too_short": "must not be empty",
    "string_unicode": "must be valid Unicode text (it holds a lone surrogate)",
    "too_long": "has {length} items; at most {max_length} are allowed",
    "too_short": "needs at least {min_length} item(s)",
    "greater_than_equal": "must be at least {ge}, got {input}",
    "less_than_equal": "must be at most {le}, got {input}",
    "greater_than": "must be greater than {gt}, got {input}",
    "less_than": "must be less than {lt}, got {input}",
    "multiple_of": "must be a multiple of {multiple_of}, got {input}",
}


def one_line(errors: list[dict[str, Any]]) -> str:
    """The first of pydantic's (or FastAPI's) request errors as one readable line that
    names the field: 'd must be between 1 and 64, got 65'. An unknown field comes first: a
    misspelt one ({"answr": 3}) is why the real one is missing, and says so better."""
    if not errors:
        return "invalid request"
    first = min(errors, key=lambda e: e.get("type") != "extra_forbidden")
    return " ".join(_describe(first).splitlines())


def _describe(e: dict[str, Any]) -> str:
    kind, loc, ctx = e.get("type"), tuple(e.get("loc", ())), e.get("ctx") or {}
    value = e.get("input")
    where = _where(loc)
    if kind == "json_invalid":
        at = f" (char {loc[1]})" if len(loc) > 1 else ""
        return f"request body is not valid JSON: {ctx.get('error', 'cannot parse it')}{at}"
    if not where:  # the body as a whole
        if kind == "value_error":
            return str(ctx.get("error", e.get("msg")))
        if kind == "missing":
            return "request body must be a JSON object; none was sent"
        return f"request body must be a JSON object, got {_show(value)}"
    if kind == "value_error":  # our validators' messages name the field themselves
        return str(ctx.get("error", e.get("msg")))
    if kind == "extra_forbidden":
        parent, _, key = where.rpartition(".")
        return f"unknown {parent + ' ' if parent else ''}field {key!r}"
    if kind == "literal_error":
        return f"unknown {where} {_show(value)}; expected one of: {ctx.get('expected')}"
    if kind in PHRASES:
        length = len(value) if isinstance(value, (str, list)) else "?"
        fields = {k: fmt_num(v) if isinstance(v, (int, float)) else v for k, v in ctx.items()}
        return f"{where} " + PHRASES[kind].format(input=_show(value), length=length, **fields)
    if kind in ("range", "even", "beyond"):
        return f"{where} {e['msg']}"
    return f"{where}: {e.get('msg', 'is not valid')}"
