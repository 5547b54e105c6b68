"""Models that ship with gptlab, loaded by name: `gptlab.load("shakespeare")`,
`gptlab sample shakespeare`, and the lab's first run.

Each is a model directory inside this package (config.json, model.safetensors,
tokenizer.json) with a manifest.json that gives every file's sha256, the model's stated
loss (the whole val split of the data it was trained on, measured on the weights as they
ship) and the command that made it (`make pretrained`, tools/pretrained.py). Every load
checks the checksums first: a damaged file is a one-line error, not a model that quietly
predicts nonsense. Weights may ship in float16; loading gives float32 parameters.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE

HERE = Path(__file__).parent
MANIFEST = "manifest.json"
FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)
NAMES = ("shakespeare",)  # one folder each, beside this file


def is_shipped(name: object) -> bool:
    return isinstance(name, str) and name in NAMES


def folder(name: str) -> Path:
    """The shipped model's folder, unchecked (see verified)."""
    if not is_shipped(name):
        raise GptlabError(f"no shipped model named {name!r}; shipped: {', '.join(NAMES)}")
    return HERE / name


def manifest(name: str) -> dict[str, Any]:
    path = folder(name) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GptlabError(f"the shipped model {name!r} has no readable {MANIFEST} ({exc}); "
                          "reinstall gptlab") from None
    if not isinstance(data, dict) or not isinstance(data.get("sha256"), dict):
        raise GptlabError(f"the shipped model {name!r}: {MANIFEST} lists no checksums; "
                          "reinstall gptlab")
    return data


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verified(name: str) -> Path:
    """The shipped model's folder once every file matches its manifest's sha256; else a
    one-line GptlabError naming the file."""
    sums = manifest(name)["sha256"]
    root = folder(name)
    for file in FILES:
        want = sums.get(file)
        path = root / file
        if want is None:
            raise GptlabError(f"the shipped model {name!r}: {MANIFEST} has no sha256 for "
                              f"{file}; reinstall gptlab")
        try:
            got = sha256_of(path)
        except OSError as exc:
            raise GptlabError(f"the shipped model {name!r}: cannot read {file} "
                              f"({exc.strerror or exc}); reinstall gptlab") from None
        if got != want:
            raise GptlabError(f"the shipped model {name!r} is damaged: {file} has sha256 "
                              f"{got[:12]}..., its manifest says {want[:12]}...; "
                              "reinstall gptlab")
    return root
