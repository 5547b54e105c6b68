"""Short timing probes that decide a speed choice for the machine at hand, once.

CPUs disagree about what is fast: bf16 matmuls have run at 4x, 0.5x and 0.01x fp32 on three
2-core VMs, and the faster layout of a decoding matmul flips from one to the next. So a
choice such as `--dtype auto` or `--weights auto` is made by timing the contenders on this
machine, and the answer is kept in `$GPTLAB_CACHE/probes.json` (default ~/.cache/gptlab),
under a key naming the machine (CPU model, logical CPUs, torch version, threads) and the
shape being probed, so the next run decides at once and the same way.

A timing taken while other work shares the machine says little about a quiet one (bf16
measured at 7.73x fp32 beside a test suite, 0.54x alone), so every probe records the
machine's load average and how far its repeated timings spread, and is cached only when
both are low: the load at most the cores available, the timings' interquartile range at
most MAX_SPREAD of their median. A cached answer is used for MAX_AGE_DAYS and by the
gptlab version that measured it; then the next run probes again. `gptlab probe` shows the
cache and `gptlab probe --clear` empties it.

Where nothing usable is cached and the machine is busy (its load average above its cores),
no probe runs at all: its timings could not be trusted, so every caller would take its
default anyway, and each call would pay for timing it again (9.9 of a 13.1 s `gptlab
sample` under load 3-8). The caller gets no timings and a Measured that says why
(timed False), and takes its default. A probe that does run says so first, in one line, to
whoever listens (`announced`: the CLI's stderr).

`GPTLAB_PROBE=off` in the environment times nothing, as on a busy machine, for scripts and
test suites whose output must not depend on the machine's speed or load.
"""

from __future__ import annotations

import contextvars
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptlab import stopping
from gptlab.data.download import default_cache_dir
from gptlab.errors import GptlabError
from gptlab.files.atomic import read_json_object, write_json
from gptlab.version import __version__

if TYPE_CHECKING:
    import torch

PROBES_FILE = "probes.json"
# The quartiles of a contender's timings may lie this far apart, relative to their median:
# a quiet machine keeps them within a few percent, a shared one does not.
MAX_SPREAD = 0.25
MAX_AGE_DAYS = 30  # then probe again: a kernel, a BIOS or a neighbour may have changed
DAY_S = 86_400.0

# The spreads budgeted_ms measures while cached() runs a probe (None: no probe running).
_spreads: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "gptlab_probe_spreads", default=None)
# Who is told, in one line, that a probe is about to run (None: nobody; see announced).
_listener: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "gptlab_probe_listener", default=None)


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_key(device: torch.device) -> str:
    """What makes a timing hold: the device, and for a CPU its model, count and threads."""
    # start-up time: the rest of this module reads the cache, for `gptlab probe`, torch-free
    import torch

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{cpu_name()} x{os.cpu_count()}, {torch.get_num_threads()} threads"
    return f"{device.type}: {name}; torch {torch.__version__}"


def now() -> float:
    """Seconds since the epoch (a function, so that tests can set the clock)."""
    return time.time()


def machine_load() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def switched_off() -> bool:
    """Whether the environment asks for no probe at all (GPTLAB_PROBE=off)."""
    return os.environ.get("GPTLAB_PROBE", "").strip().lower() == "off"


def busy(load: float | None, available: int) -> bool:
    """Whether timings taken at this load average could be trusted: not above the cores."""
    return load is not None and load > available


@contextmanager
def announced(say: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, say(line) is called before any probe runs, with what it times."""
    token = _listener.set(say)
    try:
        yield
    finally:
        _listener.reset(token)


def _timings(fn: Callable[[], Any], reps: int, warmup: int) -> list[float]:
    # stopping.check: a signal the trainer deferred ends a probe of a large model at once
    for _ in range(warmup):
        stopping.check()
        fn()
    times = []
    for _ in range(reps):
        stopping.check()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def median_seconds(fn: Callable[[], Any], reps: int, warmup: int = 1) -> float:
    """Median wall seconds of fn() over reps calls, after warmup calls."""
    return statistics.median(_timings(fn, reps, warmup))


def relative_spread(times: list[float]) -> float:
    """The interquartile range of times over their median (0 for a single time)."""
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    median = statistics.median(times)
    return (q3 - q1) / median if median > 0 else 0.0


def budgeted_ms(fn: Callable[[], Any], budget_s: float, max_reps: int) -> float:
    """Median ms of fn() over as many calls as fit in about budget_s (3 to max_reps), the
    first call, timed to size the rest, not among them. Inside cached(), the timings'
    spread is recorded for the probe's entry."""
    first = median_seconds(fn, reps=1)
    reps = max(3, min(max_reps, math.ceil(budget_s / max(first, 1e-6))))
    times = _timings(fn, reps=reps, warmup=0)
    spreads = _spreads.get()
    if spreads is not None:
        spreads.append(relative_spread(times))
    return statistics.median(times) * 1e3


def config_key(c: Any) -> str:
    """What of a GPTConfig decides a timing: its shapes and the kinds of its parts."""
    return (f"{c.n_layer}x{c.n_embd}, {c.n_head}/{c.n_kv_head} heads, ffn {c.ffn_hidden} "
            f"{c.mlp}, vocab {c.vocab_size}, {c.pos_encoding}, {c.norm}, bias {c.bias}")


def probes_path() -> Path:
    return default_cache_dir() / PROBES_FILE


def shown(path: Path) -> str:
    """path as a line shows it: ~/... under the home folder."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Measured:
    """When and how a probe's result was measured, and whether it came from the cache."""

    at: float  # seconds since the epoch
    load: float | None  # the 1-minute load average as the probe began (None: unknown)
    cores: int  # the CPUs available then
    spread: float  # the largest relative interquartile range of its contenders' timings
    gptlab: str  # the version that measured it
    cached: bool = False
    timed: bool = True  # False: the machine was busy and nothing was timed (no timings)

    @property
    def doubts(self) -> list[str]:
        """Why the timings cannot be trusted (none: they can)."""
        out = []
        if busy(self.load, self.cores):
            out.append(f"load average {self.load:.2f} on {self.cores} cores")
        if self.spread > MAX_SPREAD:
            out.append(f"timings spread {self.spread:.0%} (more than {MAX_SPREAD:.0%})")
        return out

    @property
    def trusted(self) -> bool:
        return not self.doubts

    def expired(self, at: float) -> bool:
        """Too old, from the future, or measured by another gptlab: probe again."""
        return not 0 <= at - self.at <= MAX_AGE_DAYS * DAY_S or self.gptlab != __version__

    def describe(self) -> str:
        """For a reason line: 'cached probe, 2 days old', 'probed now', 'probed now, timings
        spread 40% (more than 25%): not trusted, not cached', or 'not timed, load average
        3.10 on 2 cores'."""
        if self.cached:
            return f"cached probe, {_age(now() - self.at)} old"
        if not self.timed:
            return f"not timed, {'; '.join(self.doubts) or 'GPTLAB_PROBE=off'}"
        if self.doubts:
            return f"probed now, {'; '.join(self.doubts)}: not trusted, not cached"
        return "probed now"


def _age(seconds: float) -> str:
    for unit, size in (("day", DAY_S), ("hour", 3600.0), ("minute", 60.0)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''}"
    return "under a minute"


def _entry(raw: Any) -> tuple[dict, Measured] | None:
    """(result, Measured) of a probes.json entry; None for one of an older format."""
    if not isinstance(raw, dict) or not isinstance(raw.get("result"), dict):
        return None
    try:
        measured = Measured(at=float(raw["at"]), load=raw["load"], cores=int(raw["cores"]),
                            spread=float(raw["spread"]), gptlab=str(raw["gptlab"]), cached=True)
    except (KeyError, TypeError, ValueError):
        return None
    if measured.load is not None and not isinstance(measured.load, (int, float)):
        return None
    return raw["result"], measured


def read_store() -> dict[str, dict[str, Any]]:
    """probes.json as {kind: {key: entry}}; empty when it is missing, torn or foreign."""
    path = probes_path()
    try:
        store = read_json_object(path, "probe cache") if path.is_file() else {}
    except GptlabError:
        store = {}  # a torn or foreign file: probe again and replace it
    return {k: v for k, v in store.items() if isinstance(v, dict)}


def entries() -> list[tuple[str, str, dict, Measured | None]]:
    """(kind, key, result, Measured) of every entry in probes.json, oldest format entries
    with Measured None, for `gptlab probe`."""
    out = []
    for kind, section in read_store().items():
        for key, raw in section.items():
            parsed = _entry(raw)
            result = parsed[0] if parsed else (raw if isinstance(raw, dict) else {})
            out.append((kind, key, result, parsed[1] if parsed else None))
    return out


def usable(measured: Measured | None, at: float) -> bool:
    """Whether a cached entry may decide a choice: measured quietly, recently, by us."""
    return measured is not None and measured.trusted and not measured.expired(at)


def _still_usable(raw: Any, at: float) -> bool:
    entry = _entry(raw)
    return entry is not None and usable(entry[1], at)


def lookup(kind: str, key: str) -> tuple[dict, Measured] | None:
    """probes.json's usable result for (kind, key), if it holds one (see usable)."""
    hit = _entry(read_store().get(kind, {}).get(key))
    return hit if hit is not None and usable(hit[1], now()) else None


def cached(kind: str, key: str, measure: Callable[[], dict[str, Any]],
           what: str = "its contenders") -> tuple[dict, Measured]:
    """(the probe's result, how it was measured). measure() runs unless probes.json holds a usable
    result for (kind, key) (see usable), the machine is busy (more load than cores) or
    GPTLAB_PROBE=off: then ({}, a Measured with timed False), and the caller takes its default.
    Before it runs, the listener of `announced`, if any, is told that `what` is being timed. A
    result measured under load or with spread-out timings is returned but not cached
    (Measured.trusted says so, and Measured.describe() says why for the caller's reason line).
    Writing drops every entry that has expired. A cache that cannot be read or written is not an
    error (the probe then runs each time)."""
    store, at = read_store(), now()
    hit = _entry(store.get(kind, {}).get(key))
    if hit is not None and usable(hit[1], at):
        return hit
    load, available = machine_load(), cores()
    if busy(load, available) or switched_off():
        return {}, Measured(at=at, load=load, cores=available, spread=0.0, gptlab=__version__,
                            timed=False)
    say = _listener.get()
    if say is not None:
        say(f"timing {what} on this machine, once (cached in {shown(probes_path())} when the "
            f"timings are steady)")
    spreads = []
    token = _spreads.set(spreads)
    try:
        result = measure()
    finally:
        _spreads.reset(token)
    measured = Measured(at=at, load=load, cores=available, spread=max(spreads, default=0.0),
                        gptlab=__version__)
    if measured.trusted:
        store = {k: {name: raw for name, raw in section.items() if _still_usable(raw, at)}
                 for k, section in store.items()}
        fields = {k: v for k, v in asdict(measured).items() if k not in ("cached", "timed")}
        store[kind] = {**store.get(kind, {}), key: {"result": result, **fields}}
        try:
            write_json(probes_path(), {k: v for k, v in store.items() if v})
        except (GptlabError, OSError):
            pass
    return result, measured


def clear(kind: str | None = None) -> int:
    """Forget every cached probe (of one kind); returns how many entries went."""
    store = read_store()
    gone = {k: v for k, v in store.items() if kind is None or k == kind}
    count = sum(len(v) for v in gone.values())
    kept = {k: v for k, v in store.items() if k not in gone}
    path = probes_path()
    if kept:
        write_json(path, kept)
    else:
        path.unlink(missing_ok=True)
    return count
