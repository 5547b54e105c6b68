"""`--allocator retain`: glibc's malloc told to keep freed memory in the process, so that
a training step's tensors reuse the last step's pages instead of faulting fresh ones in.

Why: under glibc's defaults a block over the mmap threshold (128 KiB, raised as big blocks
are freed) comes from mmap and goes back at free, and the heap's top goes back to the
system once more than the trim threshold is free there; either way the next step's
activations are new pages, each one a page fault on first touch (costly on a VM). On the
speedrun's 1.70 model (B=24, T=64, width 128, bf16 autocast) a process that takes 60
steps makes about 400k page faults with the defaults and a step costs 42.7 ms; with blocks
of up to 32 MiB kept on the heap and up to 1 GiB of free heap kept, 85k faults and 35.0 ms
(0.82x). PyTorch's CPU tuning guide gets the same from
tcmalloc or jemalloc, which must be preloaded before the interpreter starts; mallopt(3)
reaches glibc's own allocator from inside a running `gptlab train`.

A process-wide setting: it stays after the run, and a process that frees a large model
keeps up to 1 GiB of it for its next allocations instead of handing it back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

ALLOCATORS = ("retain", "system")
# mallopt(3)'s parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# glibc's largest mmap threshold on a 64-bit machine (HEAP_MAX_SIZE / 2): larger blocks are
# always mmap'ed, whatever is asked
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def retain_freed_memory() -> bool:
    """Keep freed blocks of up to MMAP_THRESHOLD on the heap and up to TRIM_THRESHOLD of
    free heap in the process; whether it took (glibc only: elsewhere nothing changes).
    Setting the trim threshold alone would be worse than nothing: it also fixes the mmap
    threshold at its 128 KiB start, so both are set, the mmap threshold first."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        return False
    return libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
