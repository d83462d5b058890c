"""Synthetic training-step graphs: FSDP, tensor parallel, DDP, mixture of experts.

Each graph is a joint forward + backward step in the order a compiler emits it
before any reordering: every wait directly follows its collective, so the input
order exposes all communication and leaves room for the schedulers to work.
Deterministic from `seed` (durations get a small seeded jitter).
"""

from __future__ import annotations

from dataclasses import dataclass

from overlapsat.examples.pricing import Emitter
from overlapsat.graph import Graph


@dataclass(frozen=True)
class Shape:
    layers: int = 2
    hidden: int = 1024
    seq: int = 1024
    batch: int = 1
    world: int = 8
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "seq", "batch", "world"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{f} must be a positive integer, got {v!r}")

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


def _fwd_layer(e: Emitter, s: Shape, p: str, x: str, tp: int, param: list[str]) -> tuple[str, dict[str, str]]:
    T, h, f = s.tokens, s.hidden, 4 * s.hidden
    e.ew(f"{p}ln1", T * h, [x], f"{p}a1")
    e.mm(f"{p}qkv", T, h, 3 * h // tp, [f"{p}a1", *param], f"{p}qkv_o")
    e.custom(f"{p}attn", 4.0 * s.batch * s.seq * s.seq * h / tp, e.es * T * 4 * h / tp, [f"{p}qkv_o"], f"{p}attn_o",
             e.es * T * h // tp)
    e.mm(f"{p}proj", T, h // tp, h, [f"{p}attn_o", *param], f"{p}proj_o")
    o = f"{p}proj_o"
    if tp > 1:
        o = e.comm(f"{p}ar_attn", "all_reduce", "tp", tp, e.es * T * h, [o], f"{p}proj_r", e.es * T * h)
    e.ew(f"{p}add1", T * h, [x, o], f"{p}x1")
    e.ew(f"{p}ln2", T * h, [f"{p}x1"], f"{p}a2")
    e.mm(f"{p}up", T, h, f // tp, [f"{p}a2", *param], f"{p}u")
    e.ew(f"{p}act", T * f // tp, [f"{p}u"], f"{p}g", flops_per=8)
    e.mm(f"{p}down", T, f // tp, h, [f"{p}g", *param], f"{p}d")
    o = f"{p}d"
    if tp > 1:
        o = e.comm(f"{p}ar_mlp", "all_reduce", "tp", tp, e.es * T * h, [o], f"{p}d_r", e.es * T * h)
    e.ew(f"{p}add2", T * h, [f"{p}x1", o], f"{p}x2")
    saved = {k: f"{p}{k}" for k in ("a1", "qkv_o", "attn_o", "a2", "u", "g")}
    return f"{p}x2", saved


def _bwd_layer(e: Emitter, s: Shape, p: str, dx: str, sv: dict[str, str], tp: int,
               param: list[str]) -> tuple[str, list[str]]:
    T, h, f = s.tokens, s.hidden, 4 * s.hidden
    q = p + "b_"
    e.mm(f"{q}down_dgrad", T, h, f // tp, [dx, *param], f"{q}dg")
    e.mm(f"{q}down_wgrad", f // tp, T, h, [sv["g"], dx], f"{q}gw_down")
    e.ew(f"{q}act", T * f // tp, [sv["u"], f"{q}dg"], f"{q}du", flops_per=8)
    e.mm(f"{q}up_dgrad", T, f // tp, h, [f"{q}du", *param], f"{q}da2")
    e.mm(f"{q}up_wgrad", h, T, f // tp, [sv["a2"], f"{q}du"], f"{q}gw_up")
    da2 = f"{q}da2"
    if tp > 1:
        da2 = e.comm(f"{q}ar_mlp", "all_reduce", "tp", tp, e.es * T * h, [da2], f"{q}da2_r", e.es * T * h)
    e.ew(f"{q}ln2", T * h, [da2, dx], f"{q}dx1")
    e.mm(f"{q}proj_dgrad", T, h, h // tp, [f"{q}dx1", *param], f"{q}dattn")
    e.mm(f"{q}proj_wgrad", h // tp, T, h, [sv["attn_o"], f"{q}dx1"], f"{q}gw_proj")
    e.custom(f"{q}attn", 8.0 * s.batch * s.seq * s.seq * h / tp, e.es * T * 8 * h / tp,
             [sv["qkv_o"], f"{q}dattn"], f"{q}dqkv", e.es * T * 3 * h // tp)
    e.mm(f"{q}qkv_dgrad", T, 3 * h // tp, h, [f"{q}dqkv", *param], f"{q}da1")
    e.mm(f"{q}qkv_wgrad", h, T, 3 * h // tp, [sv["a1"], f"{q}dqkv"], f"{q}gw_qkv")
    da1 = f"{q}da1"
    if tp > 1:
        da1 = e.comm(f"{q}ar_attn", "all_reduce", "tp", tp, e.es * T * h, [da1], f"{q}da1_r", e.es * T * h)
    e.ew(f"{q}ln1", T * h, [da1, f"{q}dx1"], f"{q}dx0")
    return f"{q}dx0", [f"{q}gw_{k}" for k in ("down", "up", "proj", "qkv")]


def _param_bytes(s: Shape, tp: int = 1) -> int:
    return 12 * s.hidden * s.hidden * 2 // tp  # 12 h^2 params per layer, bf16 master copy for comm


def fsdp_transformer(layers: int = 2, hidden: int = 1024, seq: int = 1024, batch: int = 1, world: int = 8,
                     dtype: str = "bf16", seed: int = 0) -> Graph:
    """FSDP: all_gather params before each layer (fwd and bwd), reduce_scatter grads."""
    s = Shape(layers, hidden, seq, batch, world, dtype)
    e = Emitter(f"fsdp_L{layers}_h{hidden}_s{seq}_w{world}", dtype, seed)
    full = _param_bytes(s) * e.es // 2
    e.b.input("x", e.es * s.tokens * hidden, freeable=True)
    x, saved = "x", []
    for layer in range(layers):
        p = f"L{layer}_"
        e.b.input(f"{p}shard", full // world)
        pf = e.comm(f"{p}ag", "all_gather", "dp", world, full, [f"{p}shard"], f"{p}params", full)
        x, sv = _fwd_layer(e, s, p, x, 1, [pf])
        saved.append(sv)
    e.ew("loss", s.tokens * hidden, [x], "dloss")
    dx = "dloss"
    for layer in reversed(range(layers)):
        p = f"L{layer}_"
        pf = e.comm(f"{p}b_ag", "all_gather", "dp", world, full, [f"{p}shard"], f"{p}b_params", full)
        dx, grads = _bwd_layer(e, s, p, dx, saved[layer], 1, [pf])
        out = e.comm(f"{p}rs", "reduce_scatter", "dp", world, full, grads, f"{p}grad_shard", full // world)
        e.b.mark_output(out)
    e.b.mark_output(dx)
    return e.b.build()


def tp_transformer(layers: int = 2, hidden: int = 1024, seq: int = 1024, batch: int = 2, world: int = 4,
                   dtype: str = "bf16", seed: int = 0, microbatches: int = 2) -> Graph:
    """Megatron TP: all_reduce after attention and MLP; microbatches give room to overlap."""
    s = Shape(layers, hidden, seq, batch, world, dtype)
    if hidden % world:
        raise ValueError(f"hidden {hidden} must be divisible by the TP degree {world}")
    e = Emitter(f"tp_L{layers}_h{hidden}_s{seq}_w{world}_mb{microbatches}", dtype, seed)
    xs = []
    for m in range(microbatches):
        e.b.input(f"x_mb{m}", e.es * s.tokens * hidden, freeable=True)
        xs.append(f"x_mb{m}")
    saved: list[list[dict[str, str]]] = [[] for _ in range(microbatches)]
    for layer in range(layers):
        for m in range(microbatches):
            xs[m], sv = _fwd_layer(e, s, f"L{layer}_mb{m}_", xs[m], world, [])
            saved[m].append(sv)
    dxs = []
    for m in range(microbatches):
        e.ew(f"loss_mb{m}", s.tokens * hidden, [xs[m]], f"dloss_mb{m}")
        dxs.append(f"dloss_mb{m}")
    grads_of: dict[int, list[str]] = {}
    for layer in reversed(range(layers)):
        for m in range(microbatches):
            dxs[m], grads = _bwd_layer(e, s, f"L{layer}_mb{m}_", dxs[m], saved[m][layer], world, [])
            grads_of.setdefault(layer, []).extend(grads)
        e.ew(f"L{layer}_gacc", _param_bytes(s, world) // 2, grads_of[layer], f"L{layer}_grad", flops_per=1)
        e.b.mark_output(f"L{layer}_grad")
    for d in dxs:
        e.b.mark_output(d)
    return e.b.build()


def ddp_transformer(layers: int = 4, hidden: int = 1024, seq: int = 1024, batch: int = 1, world: int = 8,
                    dtype: str = "bf16", seed: int = 0, bucket_mb: float = 25.0) -> Graph:
    """DDP: gradients bucketed into all_reduces as backward produces them."""
    s = Shape(layers, hidden, seq, batch, world, dtype)
    e = Emitter(f"ddp_L{layers}_h{hidden}_s{seq}_w{world}", dtype, seed)
    e.b.input("x", e.es * s.tokens * hidden, freeable=True)
    x, saved = "x", []
    for layer in range(layers):
        x, sv = _fwd_layer(e, s, f"L{layer}_", x, 1, [])
        saved.append(sv)
    e.ew("loss", s.tokens * hidden, [x], "dloss")
    dx = "dloss"
    bucket: list[str] = []
    nbytes = 0
    nb = 0
    limit = bucket_mb * 2**20
    gsize = {"down": 4, "up": 4, "proj": 1, "qkv": 3}

    def flush() -> None:
        nonlocal bucket, nbytes, nb
        out = e.comm(f"bucket{nb}_ar", "all_reduce", "dp", world, nbytes, bucket, f"bucket{nb}_red", nbytes)
        e.b.mark_output(out)
        bucket, nbytes, nb = [], 0, nb + 1

    for layer in reversed(range(layers)):
        dx, grads = _bwd_layer(e, s, f"L{layer}_", dx, saved[layer], 1, [])
        for gname in grads:
            bucket.append(gname)
            nbytes += gsize[gname.rsplit("_", 1)[1]] * hidden * hidden * e.es
            if nbytes >= limit:
                flush()
    if bucket:
        flush()
    e.b.mark_output(dx)
    return e.b.build()


def moe_transformer(layers: int = 2, hidden: int = 1024, seq: int = 1024, batch: int = 1, world: int = 8,
                    dtype: str = "bf16", seed: int = 0, experts: int = 16, topk: int = 2) -> Graph:
    """MoE: all_to_all dispatch/combine around the experts; a shared expert can hide them."""
    s = Shape(layers, hidden, seq, batch, world, dtype)
    e = Emitter(f"moe_L{layers}_h{hidden}_s{seq}_w{world}_e{experts}", dtype, seed)
    T, h, es = s.tokens, hidden, e.es
    routed = T * topk
    e.b.input("x", es * T * h, freeable=True)
    x = "x"
    saved = []
    for layer in range(layers):
        p = f"L{layer}_"
        e.ew(f"{p}ln1", T * h, [x], f"{p}a1")
        e.mm(f"{p}qkv", T, h, 3 * h, [f"{p}a1"], f"{p}qkv_o")
        e.custom(f"{p}attn", 4.0 * batch * seq * seq * h, es * T * 4 * h, [f"{p}qkv_o"], f"{p}attn_o", es * T * h)
        e.mm(f"{p}proj", T, h, h, [f"{p}attn_o"], f"{p}proj_o")
        e.ew(f"{p}add1", T * h, [x, f"{p}proj_o"], f"{p}x1")
        e.ew(f"{p}ln2", T * h, [f"{p}x1"], f"{p}a2")
        e.mm(f"{p}router", T, h, experts, [f"{p}a2"], f"{p}logits")
        e.ew(f"{p}permute", routed * h, [f"{p}a2", f"{p}logits"], f"{p}perm")
        disp = e.comm(f"{p}a2a_disp", "all_to_all", "ep", world, es * routed * h, [f"{p}perm"], f"{p}disp", es * routed * h)
        e.mm(f"{p}exp_up", routed, h, 2 * h, [disp], f"{p}eu")
        e.ew(f"{p}exp_act", routed * 2 * h, [f"{p}eu"], f"{p}eg", flops_per=8)
        e.mm(f"{p}exp_down", routed, 2 * h, h, [f"{p}eg"], f"{p}ed")
        comb = e.comm(f"{p}a2a_comb", "all_to_all", "ep", world, es * routed * h, [f"{p}ed"], f"{p}comb", es * routed * h)
        e.mm(f"{p}shared_up", T, h, 2 * h, [f"{p}a2"], f"{p}su")
        e.ew(f"{p}shared_act", T * 2 * h, [f"{p}su"], f"{p}sg", flops_per=8)
        e.mm(f"{p}shared_down", T, 2 * h, h, [f"{p}sg"], f"{p}sd")
        e.ew(f"{p}unpermute", T * h, [comb, f"{p}logits", f"{p}sd", f"{p}x1"], f"{p}x2")
        saved.append(p)
        x = f"{p}x2"
    e.ew("loss", T * h, [x], "dloss")
    dx = "dloss"
    for layer in reversed(range(layers)):
        p = f"L{layer}_"
        q = p + "b_"
        e.ew(f"{q}unpermute", routed * h, [dx, f"{p}logits"], f"{q}dcomb")
        dd = e.comm(f"{q}a2a_comb", "all_to_all", "ep", world, es * routed * h, [f"{q}dcomb"], f"{q}ddisp",
                    es * routed * h)
        e.mm(f"{q}shared_down", T, h, 2 * h, [dx], f"{q}dsg")
        e.ew(f"{q}shared_act", T * 2 * h, [f"{p}su", f"{q}dsg"], f"{q}dsu", flops_per=8)
        e.mm(f"{q}shared_up", T, 2 * h, h, [f"{q}dsu"], f"{q}da2s")
        e.mm(f"{q}exp_down", routed, h, 2 * h, [dd, f"{p}eg"], f"{q}deg")
        e.ew(f"{q}exp_act", routed * 2 * h, [f"{p}eu", f"{q}deg"], f"{q}deu", flops_per=8)
        e.mm(f"{q}exp_up", routed, 2 * h, h, [f"{q}deu", f"{p}disp"], f"{q}dperm")
        back = e.comm(f"{q}a2a_disp", "all_to_all", "ep", world, es * routed * h, [f"{q}dperm"], f"{q}dtok",
                      es * routed * h)
        e.ew(f"{q}router", T * h, [back, f"{q}da2s", f"{p}a2", f"{p}perm"], f"{q}da2")
        e.ew(f"{q}ln2", T * h, [f"{q}da2", dx], f"{q}dx1")
        e.mm(f"{q}proj", T, h, h, [f"{q}dx1", f"{p}attn_o"], f"{q}dattn")
        e.custom(f"{q}attn", 8.0 * batch * seq * seq * h, es * T * 8 * h, [f"{p}qkv_o", f"{q}dattn"], f"{q}dqkv",
                 es * T * 3 * h)
        e.mm(f"{q}qkv", T, 3 * h, h, [f"{q}dqkv", f"{p}a1"], f"{q}da1")
        e.ew(f"{q}ln1", T * h, [f"{q}da1", f"{q}dx1"], f"{q}dx0")
        dx = f"{q}dx0"
    e.b.mark_output(dx)
    return e.b.build()


GENERATORS = {"fsdp": fsdp_transformer, "tp": tp_transformer, "ddp": ddp_transformer, "moe": moe_transformer}
_NODES_PER_LAYER = {"fsdp": 28, "tp": 62, "ddp": 24, "moe": 36}


def generate(kind: str, nodes: int | None = None, *, seed: int = 0, **kw: object) -> Graph:
    """A graph of the given family; `nodes` picks the layer count for roughly that size."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; choose from {sorted(GENERATORS)}")
    if nodes is not None:
        kw["layers"] = max(1, round(nodes / _NODES_PER_LAYER[kind]))
    return GENERATORS[kind](seed=seed, **kw)  # type: ignore[operator]
