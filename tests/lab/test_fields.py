"""What every request body of the lab shares (gptlab.lab.fields): strict scalars (4.0 is an
integer, "4", 4.5 and true are not), ranges naming both ends, cells within +-1e6, unknown
fields refused in a body and in a closed object, and pydantic's errors as one line
naming the field. The areas' own bodies: tests/lab/<area>/test_schemas.py."""

from gptlab.lab.fields import MAX_SEED, Body, Cell, Closed, Seed, _int, fmt_num, one_line


class Sample(Body):
    n: _int(1, 8) = 2
    even: _int(2, 8, even=True) = 2
    seed: Seed = 0
    cells: list[Cell] = []


class Inner(Closed):
    a: int = 0


class Outer(Body):
    inner: Inner = Inner()


def test_strict_scalars_and_ranges(invalid):
    assert Sample.model_validate({"n": 4.0}).n == 4
    assert invalid(Sample, {"n": "4"}) == "n must be an integer, got '4'"
    assert invalid(Sample, {"n": True}) == "n must be an integer, got True"
    assert invalid(Sample, {"n": 4.5}) == "n must be an integer, got 4.5"
    assert invalid(Sample, {"n": 9}) == "n must be between 1 and 8, got 9"
    assert invalid(Sample, {"even": 3}) == "even must be even (RoPE rotates pairs), got 3"
    assert invalid(Sample, {"seed": -1}) == f"seed must be between 0 and {MAX_SEED}, got -1"
    assert invalid(Sample, {"cells": [1, 2e6]}) == "cells[1] = 2e+06 is beyond +-1e+06"


def test_a_body_refuses_a_field_it_does_not_know(invalid):
    # issue 39, defect 10: {"masked": false} used to be ignored, answering with causal weights
    assert invalid(Sample, {"n": 4, "unknown": 1}) == "unknown field 'unknown'"


def test_every_request_body_of_the_app_refuses_unknown_fields(client):
    """Every route that takes a JSON body (walked from the app itself, so a new one is
    covered) answers a misspelt field with a 400 naming it, before doing any work."""
    spec = client.get("/openapi.json").json()
    bodies = {path: op["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
              for path, op in spec["paths"].items() if "requestBody" in op.get("post", {})}
    assert len(bodies) >= 15
    for path, ref in bodies.items():
        schema = spec["components"]["schemas"][ref.rpartition("/")[2]]
        assert schema.get("additionalProperties") is False, path  # the schema says so too
        res = client.post(path, json={"masked": False})
        assert res.status_code == 400, path
        assert res.json()["error"] == "unknown field 'masked'", path


def test_an_unknown_field_is_named_before_a_missing_one():
    errors = [{"type": "missing", "loc": ("body", "answer")},
              {"type": "extra_forbidden", "loc": ("body", "answr"), "input": 3}]
    assert one_line(errors) == "unknown field 'answr'"


def test_the_calculator_refuses_masked_instead_of_answering_causal(client):
    res = client.post("/api/attention", json={"tokens": "a b", "masked": False})
    assert res.status_code == 400 and "unknown field 'masked'" in res.json()["error"]


def test_a_closed_object_refuses_what_it_does_not_know(invalid):
    assert invalid(Outer, {"inner": {"b": 1}}) == "unknown inner field 'b'"
    assert invalid(Outer, {"inner": []}) == "inner must be a JSON object, got []"


def test_one_line_for_the_body_as_a_whole():
    assert one_line([]) == "invalid request"
    assert one_line([{"type": "missing", "loc": ("body",)}]) == \
        "request body must be a JSON object; none was sent"
    assert one_line([{"type": "json_invalid", "loc": ("body", 3),
                      "ctx": {"error": "Expecting value"}}]) == \
        "request body is not valid JSON: Expecting value (char 3)"
    assert one_line([{"type": "model_attributes_type", "loc": ("body",), "input": [1, 2]}]) \
        == "request body must be a JSON object, got [1, 2]"


def test_numbers_in_messages():
    assert fmt_num(0.5) == "0.5" and fmt_num(1e-7) == "1e-07" and fmt_num(42) == "42"
    assert fmt_num(10**30) == "100000000000... (31 digits)"
