"""The KV cache of continuous batching: one row per text being decoded, each of its own
length, all advanced by one token per step in one forward pass.

`SlotCache` is a cache as GPT.forward and attention use one (update, advance, length,
positions): the model needs no branch for it. Its layout is what makes that possible.
Row r's cached keys are right-aligned at a cursor M shared by every row: they fill columns
M - lens[r] .. M - 1 of one buffer per layer, with padding before them, and each step writes
every row's new key at column M. The new token of every row is then the last key, as for a
plain cache, so the causal rule (a query sees the keys up to its own) holds as it is, padding
is masked by `key_mask()` (passed as GPT.forward's attention_mask), and ALiBi's bias, a
function of (key column - query column), is each row's own distances. Only the positions
differ per row: `positions(1)` gives them, (B, 1), and the position encodings take them.

The rows in use are 0..n-1, so the batch is a view of the buffers, never a gather: a
finished text's row is filled by the last row (`remove` says which moved). Columns before
the longest row's first are left out of the view (`length` counts from there), and the
buffers are compacted to the left only when the cursor reaches their end, or grown.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gptlab.model.config import GPTConfig

FIRST_CAPACITY = 64  # columns allocated at first; doubled as the texts need


class SlotCache:
    """Keys and values for up to `slots` texts of different lengths, rows 0..n-1 in use."""

    def __init__(self, config: GPTConfig, slots: int, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32, capacity: int = FIRST_CAPACITY) -> None:
        self.slots, self.device = slots, torch.device(device or "cpu")
        self._shape = (slots, config.n_kv_head, capacity, config.head_dim)
        self.keys = [torch.zeros(self._shape, device=device, dtype=dtype)
                     for _ in range(config.n_layer)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.lengths: list[int] = []  # tokens cached per row in use
        self.cursor = 0  # the column the next step writes

    # ---------------------------------------------------------------- as a model's cache

    @property
    def n(self) -> int:
        """Rows in use."""
        return len(self.lengths)

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @property
    def length(self) -> int:
        """Columns the keys of this step's view hold before the new one: the longest row's."""
        return max(self.lengths, default=0)

    def positions(self, n: int) -> Tensor:
        """(rows, n) the positions of each row's next n tokens (n is 1: see update)."""
        own = torch.tensor(self.lengths, device=self.device)[:, None]
        return own + torch.arange(n, device=self.device)

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v (rows, n_kv, 1, hs) at the cursor; return every row's keys and values
        from the longest row's first column to the new one, (rows, n_kv, length + 1, hs)."""
        if k.shape[0] != self.n or k.shape[2] != 1:
            raise ValueError(f"a SlotCache step takes one token for each of its {self.n} rows, "
                             f"got {k.shape[0]} rows of {k.shape[2]}")
        if self.cursor >= self.capacity:
            raise ValueError("SlotCache: call reserve() before a step")
        n, at, first = self.n, self.cursor, self.cursor - self.length
        self.keys[layer][:n, :, at] = k[:, :, 0]
        self.values[layer][:n, :, at] = v[:, :, 0]
        return self.keys[layer][:n, :, first:at + 1], self.values[layer][:n, :, first:at + 1]

    def advance(self, n: int) -> None:
        self.lengths = [length + n for length in self.lengths]
        self.cursor += n

    # ---------------------------------------------------------------- for the scheduler

    def key_mask(self) -> Tensor:
        """(rows, length + 1) bool: True on each row's own keys in this step's view (its
        cached ones and the new one), False on the padding before them."""
        columns = torch.arange(self.length + 1, device=self.device)
        pad = self.length - torch.tensor(self.lengths, device=self.device)
        return columns[None, :] >= pad[:, None]

    def add(self, keys: list[Tensor], values: list[Tensor]) -> int:
        """A new row holding one text's keys and values, each layer's (n_kv, T, hs) (a
        prefill's); returns the row."""
        if self.n == self.slots:
            raise ValueError(f"SlotCache: all {self.slots} rows are in use")
        T = keys[0].shape[1]
        if self.n == 0:
            self.cursor = T
        elif self.cursor < T:  # a prompt longer than the window: move the rows right
            self._move(T - self.cursor)
        self._fit(self.cursor + 1)
        row = self.n
        for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
            self.keys[layer][row, :, self.cursor - T:self.cursor] = k
            self.values[layer][row, :, self.cursor - T:self.cursor] = v
        self.lengths.append(T)
        return row

    def remove(self, row: int) -> int | None:
        """Free `row`; the last row moves into it: returns the row that moved (None if
        `row` was the last)."""
        last = self.n - 1
        moved = None
        if row != last:
            length = self.lengths[last]
            span = slice(self.cursor - length, self.cursor)
            for buffers in (self.keys, self.values):
                for buffer in buffers:
                    buffer[row, :, span] = buffer[last, :, span]
            self.lengths[row] = length
            moved = last
        self.lengths.pop()
        if not self.lengths:
            self.cursor = 0
        return moved

    def reserve(self) -> None:
        """Room for one more step: the cursor within the buffers (compacted to the left, or
        grown)."""
        if self.cursor < self.capacity:
            return
        if self.cursor > self.length:
            self._move(self.length - self.cursor)
        else:
            self._fit(self.cursor + 1)

    def _move(self, by: int) -> None:
        """Shift every row's columns by `by` (right if positive), the cursor with them."""
        first = self.cursor - self.length
        self._fit(self.cursor + by + 1)
        n = self.n
        for buffers in (self.keys, self.values):
            for buffer in buffers:
                moved = buffer[:n, :, first:self.cursor].clone()  # the spans may overlap
                buffer[:n, :, first + by:self.cursor + by] = moved
        self.cursor += by

    def _fit(self, columns: int) -> None:
        """Buffers of at least `columns` columns (doubled until they are)."""
        capacity = self.capacity
        if columns <= capacity:
            return
        while capacity < columns:
            capacity *= 2
        for buffers in (self.keys, self.values):
            for i, old in enumerate(buffers):
                new = old.new_zeros(old.shape[0], old.shape[1], capacity, old.shape[3])
                new[:, :, :self.cursor] = old[:, :, :self.cursor]
                buffers[i] = new
