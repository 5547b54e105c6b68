"""Sharded training: FSDP2, tensor parallel and both, on a DeviceMesh (torchtitan's route).

`--parallel ddp` (the default) keeps a whole model per process (gptlab.distributed.process). The
other modes shard it:

- fsdp: `fully_shard` on each block, then on the root; every parameter, gradient and AdamW
  moment lives as a 1/N slice per rank, gathered for each block's forward and backward.
- tp: Megatron-style tensor parallel over `tp` ranks: in each block, q, k, v and the MLP's
  input projections split by output (heads and hidden units go to ranks), the attention
  out-projection and the MLP's output projection split by input, one all-reduce after each
  pair. Embeddings, norms and lm_head are replicated DTensors, so every parameter is a
  DTensor on one mesh (one optimizer, one gradient clip, one checkpoint format).
- fsdp+tp: a 2-D mesh (dp, tp): TP inside each row, FSDP across rows.

The attention's fused qkv matrix cannot be split by output as one tensor (rank 0 would get
all of q), so the sharded modes first replace it by three Linears, `qkv.q/k/v`
(`SplitQKV`), whatever the mode: one parameter layout for every mode and world size, which
is what lets a sharded checkpoint (gptlab.distributed.sharded_checkpoint) resume in another mode or
on another number of ranks. `fused_weights` turns that layout back into the ordinary one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, distribute_module
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    parallelize_module,
)

from gptlab.distributed.layout import Layout
from gptlab.distributed.process import Dist
from gptlab.errors import UsageError


@contextlib.contextmanager
def process_group(ctx: Dist) -> Iterator[None]:
    """A process group even for one process (a sharded mode on its own, say resuming a
    sharded run on one machine): DeviceMesh and DTensor need one."""
    if dist.is_initialized():
        yield
        return
    backend = "nccl" if ctx.device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def build_mesh(layout: Layout, ctx: Dist) -> DeviceMesh:
    return init_device_mesh(ctx.device.type, (layout.dp, layout.tp),
                            mesh_dim_names=("dp", "tp"))


def data_ranks(ctx: Dist, mesh: DeviceMesh) -> Dist:
    """ctx as the batches see it: the ranks of one tensor-parallel group train on the same
    rows, so a rank's place in the batch is its mesh row."""
    return replace(ctx, rank=mesh.get_local_rank("dp"), world_size=mesh.size(0))


# --- one parameter layout for every sharded mode --------------------------------------------


class SplitQKV(nn.Module):
    """The fused qkv projection as three Linears, so tensor parallel can split each by
    heads; the output is the same [q | k | v] the fused one gives."""

    def __init__(self, fused: nn.Linear, q_dim: int, kv_dim: int) -> None:
        super().__init__()
        bias = fused.bias is not None
        device, dtype = fused.weight.device, fused.weight.dtype
        sizes = (q_dim, kv_dim, kv_dim)
        self.q, self.k, self.v = (nn.Linear(fused.in_features, n, bias=bias, device=device,
                                            dtype=dtype) for n in sizes)
        with torch.no_grad():
            for part, w in zip((self.q, self.k, self.v), fused.weight.split(sizes), strict=True):
                part.weight.copy_(w)
            if bias:
                for part, b in zip((self.q, self.k, self.v), fused.bias.split(sizes),
                                   strict=True):
                    part.bias.copy_(b)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.q(x), self.k(x), self.v(x)], dim=-1)


def split_qkv(model: nn.Module) -> None:
    for block in model.blocks:
        attn = block.attn
        attn.qkv = SplitQKV(attn.qkv, attn.n_head * attn.head_dim,
                            attn.n_kv_head * attn.head_dim)


def fused_weights(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """A split-layout state dict (names with qkv.q/k/v) in the ordinary layout (qkv)."""
    out = {}
    for name, tensor in state.items():
        for part in ("q", "k", "v"):
            marker = f".qkv.{part}."
            if marker in name:
                if part == "q":
                    prefix, kind = name.split(marker)
                    pieces = [state[f"{prefix}.qkv.{p}.{kind}"] for p in ("q", "k", "v")]
                    out[f"{prefix}.qkv.{kind}"] = torch.cat(pieces, dim=0)
                break
        else:
            out[name] = tensor
    return out


# --- applying a layout ----------------------------------------------------------------------


def parallelize(model: nn.Module, layout: Layout, mesh, *, reshard_after_forward: bool = True,
                param_dtype: torch.dtype | None = None) -> nn.Module:
    """Shard `model` (a GPT whose weights are the same on every rank) in place."""
    split_qkv(model)
    if layout.uses_tp:
        _tensor_parallel(model, mesh["tp"])
    if layout.uses_fsdp:
        policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
        kwargs = dict(mesh=mesh["dp"], reshard_after_forward=reshard_after_forward,
                      mp_policy=policy)
        for block in model.blocks:
            fully_shard(block, **kwargs)
        fully_shard(model, **kwargs)
    return model


def _tensor_parallel(model: nn.Module, tp_mesh: DeviceMesh) -> None:
    """The weights are cut by heads (a kv head with its group of query heads), and each
    attention layer is told the heads its rank computes (local_heads); the model still
    agrees with model.config."""
    ranks = tp_mesh.size()
    for block in model.blocks:
        attn = block.attn
        attn.local_heads = (attn.n_head // ranks, attn.n_kv_head // ranks)
        plan = {"attn.qkv.q": ColwiseParallel(), "attn.qkv.k": ColwiseParallel(),
                "attn.qkv.v": ColwiseParallel(), "attn.proj": RowwiseParallel(),
                "mlp.proj": RowwiseParallel(), "norm_1": Replicated(), "norm_2": Replicated()}
        inputs = ("gate", "up") if hasattr(block.mlp, "gate") else ("fc",)
        plan.update({f"mlp.{name}": ColwiseParallel() for name in inputs})
        parallelize_module(block, tp_mesh, plan)
    tied = model.lm_head.weight is model.wte.weight
    parallelize_module(model.wte, tp_mesh, Replicated())
    if tied:
        model.lm_head.weight = model.wte.weight
    for name in ("wpe", "ln_f", "lm_head"):
        module = getattr(model, name)
        if module is not None and any(True for _ in module.parameters()):
            parallelize_module(module, tp_mesh, Replicated())
    plain = [n for n, p in model.named_parameters() if not isinstance(p, DTensor)]
    if plain:  # a new kind of layer the plan does not know yet
        raise UsageError(f"tensor parallel has no plan for {', '.join(plain[:3])}")


class Replicated(ParallelStyle):
    """A ParallelStyle for layers every rank of a TP group computes whole (embeddings,
    norms, lm_head): their parameters become Replicate DTensors, inputs and outputs stay
    plain tensors. Only so that every parameter lives on one mesh."""

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        def partition(_name, mod, mesh):
            for key, p in list(mod.named_parameters(recurse=False)):
                if not isinstance(p, DTensor):
                    mod.register_parameter(key, nn.Parameter(
                        DTensor.from_local(p.data, mesh, [Replicate()], run_check=False),
                        requires_grad=p.requires_grad))

        def to_dtensor(_mod, inputs, mesh):
            return tuple(DTensor.from_local(t, mesh, [Replicate()], run_check=False)
                         if isinstance(t, Tensor) and not isinstance(t, DTensor) else t
                         for t in inputs)

        def to_local(_mod, output, _mesh):
            return _Unviewed.apply(output.to_local()) if isinstance(output, DTensor) else output

        return distribute_module(module, mesh, partition, to_dtensor, to_local)


class _Unviewed(torch.autograd.Function):
    """The same values as a tensor that is not a view; the gradient passes through.

    DTensor.to_local returns a view of the DTensor's local tensor (`view_as`, so autograd's
    metadata lands on a new object). lm_head's output is the model's, and a module FSDP2
    wraps (the root, under fsdp+tp) must not return a view: an in-place op on it would skip
    FSDP's pre-backward hook, and torch warns so on every step. The DTensor is dropped as
    soon as its local tensor is out, so its storage is handed over, not copied."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        return x.detach()  # shares the storage (and its version counter); not a view

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad


# --- gathering ------------------------------------------------------------------------------


def full_weights(model: nn.Module) -> dict[str, Tensor] | None:
    """Every rank takes part; rank 0 gets the whole weights on the CPU in the ordinary
    layout (tied lm_head dropped, as gptlab.model_dir saves them), the others None."""
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                 cpu_offload=True))
    if dist.get_rank() != 0:
        return None
    state = fused_weights(state)
    if model.config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return {k: v.detach().contiguous() for k, v in state.items()}


def local_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """What this rank holds of the weights, gradients and optimizer moments (bytes of the
    local shards; a tied matrix once)."""

    def size(t: Tensor) -> int:
        local = t.to_local() if hasattr(t, "to_local") else t
        return local.numel() * local.element_size()

    params = list(model.parameters())  # unique: a tied matrix appears once
    return {
        "weights": sum(size(p) for p in params),
        "grads": sum(size(p.grad) for p in params if p.grad is not None),
        "optimizer": sum(size(v) for p in params for v in optimizer.state.get(p, {}).values()
                         if isinstance(v, Tensor) and v.dim() > 0),
    }
