"""Shared by the longer-than-trained view's tests: a runs folder holding a quick context
experiment ('ctx') and the tiny run, and a client for it."""

from __future__ import annotations

import shutil

import pytest
from fastapi.testclient import TestClient

from gptlab.lab.server import create_app


@pytest.fixture(scope="module")
def lab(tmp_path_factory, context_experiment, copy_tiny_run):
    """(client, root) of a runs folder holding 'ctx' and 'tiny'."""
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(context_experiment, root / "ctx")
    copy_tiny_run(root / "tiny")
    return TestClient(create_app(root)), root
