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
