"""Fixtures shared by the tests of gptlab.files."""

from __future__ import annotations

import pytest


@pytest.fixture
def write_gguf():
    """write_gguf(path, **strings) -> path: a small GGUF file (one tensor) holding the given
    string keys, as gptlab's exports and other tools' files do."""
    import gguf  # the test extra's
    import numpy as np

    def write(path, **strings):
        writer = gguf.GGUFWriter(path, "llama")
        for key, value in strings.items():
            writer.add_string(key, value)
        writer.add_tensor("t", np.zeros(4, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    return write
