"""Small transformer steps with real collectives, for capture on the fake process group."""

from __future__ import annotations

from typing import Any


def fsdp_transformer(layers: int = 2, hidden: int = 64, heads: int = 4) -> Any:
    """SimpleFSDP style: parameters all_gathered in forward (reduce_scatter in backward)."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_gather_tensor_autograd

    from overlapsat.torch.capture import ensure_fake_process_group

    ensure_fake_process_group()

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            ws = dist.get_world_size()
            self.qkv = torch.nn.Parameter(torch.randn(3 * hidden // ws, hidden) * 0.02)
            self.proj = torch.nn.Parameter(torch.randn(hidden // ws, hidden) * 0.02)
            self.up = torch.nn.Parameter(torch.randn(4 * hidden // ws, hidden) * 0.02)
            self.down = torch.nn.Parameter(torch.randn(hidden // ws, 4 * hidden) * 0.02)

        def forward(self, x: Any) -> Any:
            g = dist.group.WORLD
            qkv, proj, up, down = (all_gather_tensor_autograd(p, 0, g) for p in (self.qkv, self.proj, self.up, self.down))
            b, s, h = x.shape
            q, k, v = (x @ qkv.t()).split(hidden, dim=-1)
            q, k, v = (t.view(b, s, heads, h // heads).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(1, 2).reshape(b, s, h) @ proj.t()
            return x + torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (h,)) @ up.t()) @ down.t()

    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def tp_transformer(layers: int = 2, hidden: int = 64) -> Any:
    """Megatron tensor parallel with DTensor: colwise up/qkv, rowwise down/proj (all_reduces)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from overlapsat.torch.capture import ensure_fake_process_group

    ensure_fake_process_group()

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn_in = torch.nn.Linear(hidden, hidden, bias=False)
            self.attn_out = torch.nn.Linear(hidden, hidden, bias=False)
            self.up = torch.nn.Linear(hidden, 4 * hidden, bias=False)
            self.down = torch.nn.Linear(4 * hidden, hidden, bias=False)

        def forward(self, x: Any) -> Any:
            x = x + self.attn_out(torch.tanh(self.attn_in(torch.nn.functional.layer_norm(x, x.shape[-1:]))))
            return x + self.down(torch.relu(self.up(torch.nn.functional.layer_norm(x, x.shape[-1:]))))

    model = torch.nn.Sequential(*[Block() for _ in range(layers)])
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    plan = {}
    for i in range(layers):
        plan.update({f"{i}.attn_in": ColwiseParallel(), f"{i}.attn_out": RowwiseParallel(),
                     f"{i}.up": ColwiseParallel(), f"{i}.down": RowwiseParallel()})
    return parallelize_module(model, mesh, plan)


def _rms_norm(x: Any, w: Any) -> Any:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rope(x: Any, cos: Any, sin: Any) -> Any:
    """Rotary embedding on the last dimension (pairs split in halves, as Llama's reference code)."""
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def llama_fsdp(layers: int = 4, dim: int = 256, heads: int = 4, ffn: int = 688, seq: int = 64) -> Any:
    """A Llama-style decoder (RMSNorm, RoPE, causal SDPA, SwiGLU) with SimpleFSDP sharding:
    every weight is sharded on dim 0 and all-gathered where used (reduce_scatter in backward)."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_gather_tensor_autograd

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group()
    ws = dist.get_world_size()
    hd = dim // heads
    inv = 1.0 / (10000 ** (torch.arange(0, hd // 2).float() / (hd // 2)))
    ang = torch.outer(torch.arange(seq).float(), inv)
    cos, sin = ang.cos()[None, None], ang.sin()[None, None]

    def shard(rows: int, cols: int) -> Any:
        return torch.nn.Parameter(torch.randn(rows // ws, cols) * 0.02)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = shard(dim, dim), shard(dim, dim), shard(dim, dim), shard(dim, dim)
            self.w1, self.w3, self.w2 = shard(ffn, dim), shard(ffn, dim), shard(dim, ffn)
            self.n1, self.n2 = torch.nn.Parameter(torch.ones(dim // ws)), torch.nn.Parameter(torch.ones(dim // ws))

        def forward(self, x: Any) -> Any:
            grp = dist.group.WORLD
            wq, wk, wv, wo, w1, w3, w2, n1, n2 = (all_gather_tensor_autograd(p, 0, grp) for p in (
                self.wq, self.wk, self.wv, self.wo, self.w1, self.w3, self.w2, self.n1, self.n2))
            b, s, _ = x.shape
            h = _rms_norm(x, n1)
            q, k, v = ((h @ w.t()).view(b, s, heads, hd).transpose(1, 2) for w in (wq, wk, wv))
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(1, 2).reshape(b, s, dim) @ wo.t()
            h = _rms_norm(x, n2)
            return x + (torch.nn.functional.silu(h @ w1.t()) * (h @ w3.t())) @ w2.t()

    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def tp_sp_transformer(layers: int = 4, dim: int = 256, ffn: int = 1024) -> Any:
    """Tensor parallel with sequence parallel (DTensor): norms on sequence shards, all_gather
    before the column-parallel projections, reduce_scatter after the row-parallel ones."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    from overlapsat.torch.capture import ensure_fake_process_group

    ensure_fake_process_group()

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = torch.nn.LayerNorm(dim)
            self.attn_in = torch.nn.Linear(dim, dim, bias=False)
            self.attn_out = torch.nn.Linear(dim, dim, bias=False)
            self.norm2 = torch.nn.LayerNorm(dim)
            self.up = torch.nn.Linear(dim, ffn, bias=False)
            self.down = torch.nn.Linear(ffn, dim, bias=False)

        def forward(self, x: Any) -> Any:
            x = x + self.attn_out(torch.tanh(self.attn_in(self.norm1(x))))
            return x + self.down(torch.nn.functional.silu(self.up(self.norm2(x))))

    model = torch.nn.Sequential(*[Block() for _ in range(layers)])
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    plan: dict[str, Any] = {}
    for i in range(layers):
        plan.update({
            f"{i}.norm1": SequenceParallel(), f"{i}.norm2": SequenceParallel(),
            f"{i}.attn_in": ColwiseParallel(input_layouts=Shard(1)),
            f"{i}.attn_out": RowwiseParallel(output_layouts=Shard(1)),
            f"{i}.up": ColwiseParallel(input_layouts=Shard(1)),
            f"{i}.down": RowwiseParallel(output_layouts=Shard(1)),
        })
    return parallelize_module(model, mesh, plan)


def moe_ep(layers: int = 4, dim: int = 256, ffn: int = 512, experts_per_rank: int = 2) -> Any:
    """Expert parallel MoE: tokens dispatched to the experts' ranks and combined back with
    all_to_all (equal splits, so shapes stay static), a dense attention-like mixer between."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_to_all_single_autograd

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group()
    ws = dist.get_world_size()

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mix = torch.nn.Linear(dim, dim, bias=False)
            self.router = torch.nn.Linear(dim, experts_per_rank, bias=False)
            self.w_in = torch.nn.Parameter(torch.randn(experts_per_rank, dim, ffn) * 0.02)
            self.w_out = torch.nn.Parameter(torch.randn(experts_per_rank, ffn, dim) * 0.02)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            x = x + torch.tanh(self.mix(torch.nn.functional.layer_norm(x, (dim,))))
            t = x.reshape(b * s, dim)
            grp = dist.group.WORLD
            sent = all_to_all_single_autograd(t, None, None, grp)  # equal splits to every rank
            gate = torch.softmax(self.router(sent), dim=-1)
            h = torch.einsum("td,edf->etf", sent, self.w_in)
            y = torch.einsum("etf,efd->etd", torch.nn.functional.silu(h), self.w_out)
            y = (y * gate.t().unsqueeze(-1)).sum(0)
            back = all_to_all_single_autograd(y, None, None, grp)
            return x + back.reshape(b, s, dim)

    del ws
    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def ddp_bucketed(layers: int = 6, dim: int = 256, bucket_layers: int = 2) -> Any:
    """DDP-style data parallel: gradients all_reduced in buckets of `bucket_layers` layers
    (concatenated, one all_reduce per bucket, in backward)."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_reduce

    from overlapsat.torch.capture import ensure_fake_process_group

    ensure_fake_process_group()

    class Bucket(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *params: Any) -> Any:  # type: ignore[override]
            ctx.shapes = [p.shape for p in params]
            return tuple(p.view_as(p) for p in params)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
            flat = torch.cat([g.reshape(-1) for g in grads])
            red = all_reduce(flat, "sum", dist.group.WORLD)  # waited on first use (one wait per collective)
            out, k = [], 0
            for shp in ctx.shapes:
                n = int(torch.Size(shp).numel())
                out.append(red[k:k + n].view(shp))
                k += n
            return tuple(out)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(layers))

        def forward(self, x: Any) -> Any:
            for i in range(0, layers, bucket_layers):
                mods = list(self.layers[i:i + bucket_layers])
                params = Bucket.apply(*[p for m in mods for p in (m.weight, m.bias)])
                for j in range(len(mods)):
                    w, bias = params[2 * j], params[2 * j + 1]
                    x = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bias))
            return x

    return Model()


def fsdp_tp_llama(layers: int = 2, dim: int = 256, heads: int = 4, ffn: int = 688, tp: int = 2) -> Any:
    """2-D parallel Llama-style decoder: tensor parallel inside groups of `tp` ranks (Megatron column/row
    split, all_reduce of the row-parallel outputs and of the column-parallel inputs' gradients) and
    SimpleFSDP across them (each weight shard all_gathered over the data-parallel group, reduce_scatter in
    backward). Rank 0's two process groups: ranks 0..tp-1 and every tp-th rank."""
    import torch
    from torch.distributed._functional_collectives import all_gather_tensor_autograd, all_reduce

    tp_group, dp_group, dp = _mesh_2d(tp, "tp")
    hd = dim // heads

    class ReduceOut(torch.autograd.Function):  # row-parallel output: all_reduce forward, identity backward
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return all_reduce(x, "sum", tp_group)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    class CopyIn(torch.autograd.Function):  # column-parallel input: identity forward, all_reduce backward
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return all_reduce(g, "sum", tp_group)

    def shard(rows: int, cols: int) -> Any:
        return torch.nn.Parameter(torch.randn(rows // dp, cols) * 0.02)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wqkv, self.wo = shard(3 * dim // tp, dim), shard(dim, dim // tp)
            self.w13, self.w2 = shard(2 * ffn // tp, dim), shard(dim, ffn // tp)

        def forward(self, x: Any) -> Any:
            wqkv, wo, w13, w2 = (all_gather_tensor_autograd(p, 0, dp_group) for p in (self.wqkv, self.wo, self.w13,
                                                                                     self.w2))
            b, s, _ = x.shape
            h = CopyIn.apply(torch.nn.functional.rms_norm(x, (dim,)))
            q, k, v = (h @ wqkv.t()).split(dim // tp, dim=-1)
            q, k, v = (t.reshape(b, s, heads // tp, hd).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + ReduceOut.apply(a.transpose(1, 2).reshape(b, s, dim // tp) @ wo.t())
            h = CopyIn.apply(torch.nn.functional.rms_norm(x, (dim,)))
            g1, g3 = (h @ w13.t()).split(ffn // tp, dim=-1)
            return x + ReduceOut.apply((torch.nn.functional.silu(g1) * g3) @ w2.t())

    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def moe_fsdp_ep(layers: int = 2, dim: int = 256, heads: int = 4, ffn: int = 128, experts_per_rank: int = 2,
                ep: int = 2) -> Any:
    """DeepSeek-style MoE decoder on two process groups: routed experts spread over `ep` ranks (tokens
    dispatched and combined with all_to_all over the EP group), and every weight (attention, router,
    shared expert, routed experts) sharded SimpleFSDP-style over the data-parallel group of the other ranks
    (all_gather forward, reduce_scatter backward). Rank 0's groups: ranks 0..ep-1 and every ep-th rank."""
    import torch
    from torch.distributed._functional_collectives import all_gather_tensor_autograd, all_to_all_single_autograd

    ep_group, dp_group, dp = _mesh_2d(ep, "ep")
    hd = dim // heads
    e = experts_per_rank

    def shard(rows: int, cols: int) -> Any:
        return torch.nn.Parameter(torch.randn(rows // dp, cols) * 0.02)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wqkv, self.wo, self.router = shard(3 * dim, dim), shard(dim, dim), shard(e * ep, dim)
            self.s13, self.s2 = shard(2 * ffn, dim), shard(dim, ffn)  # the shared expert
            self.w13, self.w2 = shard(e * 2 * ffn, dim), shard(e * dim, ffn)  # this rank's routed experts

        def forward(self, x: Any) -> Any:
            wqkv, wo, router, s13, s2, w13, w2 = (all_gather_tensor_autograd(p, 0, dp_group) for p in (
                self.wqkv, self.wo, self.router, self.s13, self.s2, self.w13, self.w2))
            b, s, _ = x.shape
            h = torch.nn.functional.rms_norm(x, (dim,))
            q, k, v = (h @ wqkv.t()).split(dim, dim=-1)
            q, k, v = (t.reshape(b, s, heads, hd).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(1, 2).reshape(b, s, dim) @ wo.t()
            h = torch.nn.functional.rms_norm(x, (dim,)).reshape(b * s, dim)
            gate = torch.softmax(h @ router.t(), dim=-1)[:, :e]  # this rank's experts' share (static shapes)
            g1, g3 = (h @ s13.t()).split(ffn, dim=-1)
            shared = (torch.nn.functional.silu(g1) * g3) @ s2.t()
            sent = all_to_all_single_autograd(h, None, None, ep_group)  # equal splits to every EP rank
            u = torch.einsum("td,efd->etf", sent, w13.reshape(e, 2 * ffn, dim))
            u1, u3 = u.split(ffn, dim=-1)
            y = torch.einsum("etf,edf->etd", torch.nn.functional.silu(u1) * u3, w2.reshape(e, dim, ffn))
            back = all_to_all_single_autograd((y * gate.t().unsqueeze(-1)).sum(0), None, None, ep_group)
            return x + (shared + back).reshape(b, s, dim)

    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def _mesh_2d(inner: int, what: str) -> tuple[Any, Any, int]:
    """Rank 0's two groups of a 2-D mesh (the fake process group unless one is up): ranks 0..inner-1, and
    every inner-th rank (the data-parallel group), with the data-parallel size."""
    import torch.distributed as dist

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group()
    world = dist.get_world_size()
    if world % inner:
        raise ValueError(f"world size {world} is not a multiple of {what}={inner}")
    return dist.new_group(list(range(inner))), dist.new_group(list(range(0, world, inner))), world // inner

