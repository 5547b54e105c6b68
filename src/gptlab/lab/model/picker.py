"""The runs a view's run picker offers: those of the runs folder, and those whose tokenizer
encodes a text (gptlab.lab.runs.Runs.encoding), one of which the picker defaults to."""

from __future__ import annotations

from typing import Any

from gptlab.lab.model import schemas
from gptlab.lab.runs import Runs


def runs_view(runs: Runs) -> dict[str, Any]:
    return {"root": str(runs.root), "runs": runs.list()}


def runs_encoding_view(runs: Runs, body: schemas.RunsEncodingRequest) -> dict[str, Any]:
    offer = None if body.run is None else runs.fitted(body.run, body.text)
    return {"text": body.text, "runs": runs.encoding(body.text), "offer": offer}
