"""`gptlab probe`: the speed probes' cached answers (see gptlab.probe): when each was
measured, under what load, how steady its timings were, and whether it is still used."""

from __future__ import annotations

import argparse
import json
import time

from gptlab import probe
from gptlab.probe import MAX_AGE_DAYS, MAX_SPREAD

PROBE_KINDS = ("train_dtype", "muon_dtype", "decode")  # gptlab.probe's callers, by kind


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "probe",
        help="show or clear the cached speed probes (--dtype auto, --weights auto)",
        description=(
            "--dtype auto, --muon-dtype auto and sample's --weights time their contenders on "
            "this machine once and cache the answer in $GPTLAB_CACHE/probes.json (default "
            "~/.cache/gptlab). An answer is cached only when measured quietly (the load "
            "average at most the cores, the timings' quartiles within "
            f"{MAX_SPREAD:.0%} of their median) and is used for {MAX_AGE_DAYS} days by the "
            "gptlab version that measured it; then the next "
            "run probes again. This lists the cache; --clear empties it, so the next run "
            "probes afresh."
        ),
        examples=[
            "gptlab probe",
            "gptlab probe --json",
            "gptlab probe --clear --kind decode",
        ],
    )
    p.add_argument("--clear", action="store_true",
                   help="forget the cached answers (all, or those of --kind)")
    p.add_argument("--kind", choices=PROBE_KINDS,
                   help="only this kind of probe: train_dtype (--dtype auto), muon_dtype "
                        "(--muon-dtype auto) or decode (sample --weights)")
    p.add_argument("--json", action="store_true", help="print the entries as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.clear:
        gone = probe.clear(args.kind)
        print(f"cleared {gone} cached probe{'s' if gone != 1 else ''} from "
              f"{probe.probes_path()}")
        return 0
    at = probe.now()
    entries = [e for e in probe.entries() if args.kind in (None, e[0])]
    if args.json:
        print(json.dumps([{"kind": kind, "key": key, "result": result,
                           "measured": None if m is None else {
                               "at": m.at, "load": m.load, "cores": m.cores,
                               "spread": m.spread, "gptlab": m.gptlab},
                           "used": probe.usable(m, at)}
                          for kind, key, result, m in entries], indent=1))
        return 0
    print(f"{probe.probes_path()}: {len(entries)} cached probe"
          f"{'s' if len(entries) != 1 else ''}")
    for kind, key, result, measured in entries:
        print(f"\n{kind}: {key}")
        print(f"  {_when(measured, at)}")
        print(f"  ms: {_timings(result)}")
    return 0


def _when(measured: probe.Measured | None, at: float) -> str:
    if measured is None:
        return "measured by an older gptlab (no load or spread recorded): not used"
    day = time.strftime("%Y-%m-%d %H:%M", time.localtime(measured.at))
    load = "unknown" if measured.load is None else f"{measured.load:.2f}"
    state = ("used" if probe.usable(measured, at) else
             "expired: the next run probes again" if measured.expired(at) else
             "not trusted: the next run probes again")
    return (f"measured {day} by gptlab {measured.gptlab}, load average {load} on "
            f"{measured.cores} cores, timings spread {measured.spread:.0%}: {state}")


def _timings(result: dict) -> str:
    """The contenders, fastest first (n/a: not available on this machine)."""
    known = sorted(((k, v) for k, v in result.items() if isinstance(v, (int, float))),
                   key=lambda kv: kv[1])
    missing = [k for k, v in result.items() if v is None]
    return ", ".join([f"{k} {v:.2f}" for k, v in known] + [f"{k} n/a" for k in missing])
