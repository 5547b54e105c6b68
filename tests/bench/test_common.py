"""The benchmarks' server process: started, answering, then gone; one that ends at once
raises naming it and quoting what it printed."""

from __future__ import annotations

import os
import sys

import pytest
from bench.common import server_process

from gptlab.web.threaded import free_port


def test_a_server_process_answers_inside_the_block_and_is_gone_after(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
               "--directory", str(tmp_path)]
    with server_process("http.server", command, f"http://127.0.0.1:{port}/", 30) as pid:
        os.kill(pid, 0)  # alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_server_that_ends_at_once_says_so_with_its_last_words():
    command = [sys.executable, "-c", "print('no model here'); raise SystemExit(2)"]
    with pytest.raises(RuntimeError, match="the peer did not start: no model here"):
        with server_process("the peer", command, f"http://127.0.0.1:{free_port()}/", 30):
            pass
