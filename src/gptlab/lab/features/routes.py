"""View 15's routes: the dictionaries the view can open, a search over one's features, one
feature read whole (gptlab.lab.features.dictionary computes them)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab.context.window import SHAKESPEARE_VAL
from gptlab.lab.features import schemas
from gptlab.lab.features.dictionary import (
    REFERENCE_CHARS,
    feature_view,
    list_dictionaries,
    search_view,
)
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.get("/api/features/dictionaries", response_model=schemas.DictionariesResponse)
def dictionaries(runs: RunsDep) -> JSONResponse:
    """The dictionaries the view can open: the shipped one, then the runs folder's."""
    return JSONResponse({"dictionaries": list_dictionaries(runs),
                         "text": f"{SHAKESPEARE_VAL}, its first {REFERENCE_CHARS:,} "
                                 f"characters"})


@router.post("/api/features/search", response_model=schemas.SearchResponse, responses=BAD_INPUT)
def search(body: schemas.SearchRequest, runs: RunsDep) -> JSONResponse:
    """The features that promote a token, or fire where the text has it."""
    return JSONResponse(search_view(runs, body))


@router.post("/api/features/feature", response_model=schemas.FeatureResponse,
             responses=BAD_INPUT)
def feature(body: schemas.FeatureRequest, runs: RunsDep) -> JSONResponse:
    """One feature: top contexts, logit effect, histogram, and along a typed text."""
    return JSONResponse(feature_view(runs, body))
