"""`gptlab probe`: the cached speed probes, each with when it was measured, under what
load, how steady, and whether it is still used; --clear forgets them. The clock and the
load are the test's."""

from __future__ import annotations

import json

import pytest

from gptlab import probe

pytestmark = pytest.mark.usefixtures("probing")  # see conftest.py


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A fresh cache holding three entries measured at a clock the test sets: a quiet one,
    one that has expired and one from before load and spread were recorded."""
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path))
    at = [1_800_000_000.0]
    monkeypatch.setattr(probe, "now", lambda: at[0])
    monkeypatch.setattr(probe, "cores", lambda: 2)
    monkeypatch.setattr(probe, "machine_load", lambda: 0.42)
    probe.cached("decode", "cpu: old", lambda: {"fp32/linear": 2.0})
    at[0] += (probe.MAX_AGE_DAYS - 2) * probe.DAY_S
    probe.cached("train_dtype", "cpu: new", lambda: {"float32": 5.4, "bfloat16": 10.0})
    at[0] += 3 * probe.DAY_S  # the decode entry is now past its age
    store = json.loads((tmp_path / probe.PROBES_FILE).read_text())
    store["muon_dtype"] = {"cpu: older gptlab": {"float32": 1.0, "bfloat16": 3.0}}
    (tmp_path / probe.PROBES_FILE).write_text(json.dumps(store))
    return tmp_path / probe.PROBES_FILE


def test_probe_lists_each_entry_with_when_load_spread_and_use(cache, gptlab):
    code, out, err = gptlab("probe")
    assert code == 0, err
    blocks = out.split("\n\n")
    assert blocks[0] == f"{cache}: 3 cached probes"
    decode, train, muon = blocks[1:]
    assert decode.startswith("decode: cpu: old\n  measured ")
    assert "load average 0.42 on 2 cores, timings spread 0%: expired: the next run probes " \
           "again" in decode
    assert train.splitlines()[1].endswith(": used")
    assert train.splitlines()[2] == "  ms: float32 5.40, bfloat16 10.00"
    assert "measured by an older gptlab (no load or spread recorded): not used" in muon
    code, out, _ = gptlab("probe", "--json", "--kind", "train_dtype")
    (entry,) = json.loads(out)
    assert entry["used"] and entry["measured"]["load"] == 0.42 and entry["result"] == {
        "float32": 5.4, "bfloat16": 10.0}


def test_clear_forgets_one_kind_or_every_probe(cache, gptlab):
    assert gptlab("probe", "--clear", "--kind", "decode")[1] == (
        f"cleared 1 cached probe from {cache}\n")
    assert sorted(json.loads(cache.read_text())) == ["muon_dtype", "train_dtype"]
    assert gptlab("probe", "--clear")[1] == f"cleared 2 cached probes from {cache}\n"
    assert not cache.exists()
    assert gptlab("probe")[1] == f"{cache}: 0 cached probes\n"
