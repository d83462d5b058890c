"""The FX front end (#12): importer, storage-based memory, and torch's OverlapScheduler as a peer row."""

import pytest

torch = pytest.importorskip("torch")

from overlapsat import GraphError, compare, simulate, validate  # noqa: E402
from overlapsat.graph import NodeKind  # noqa: E402


def _world():
    """The fake process group's size: 2 (every capture test's default, so test order does not matter), or
    whatever an earlier test of this process initialised."""
    import torch.distributed as dist

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group(2)
    return dist.get_world_size()


def _trace(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    _world()
    return make_fx(fn, tracing_mode="fake")(*args)


def every_collective():
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    _world()
    pair = dist.new_group([0, 1])  # a second process group (as in a 2-D mesh)

    def f(w, x, y):
        full = funcol.all_gather_tensor(w, 0, dist.group.WORLD)
        h = x @ full.T
        r = funcol.reduce_scatter_tensor(h, "sum", 0, dist.group.WORLD)
        a = funcol.all_reduce(y, "sum", pair)
        t = funcol.all_to_all_single(a, None, None, pair)
        c1, c2 = funcol.all_gather_into_tensor_coalesced([w, y], pair)
        return r.sum() + t.sum() + c1.sum() + c2.sum()

    return _trace(f, torch.randn(8, 16), torch.randn(8, 16), torch.randn(4, 16))


def _trace_plain():
    """An FSDP-style step without coalesced collectives."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    def f(w1, w2, x):
        a = funcol.all_gather_tensor(w1, 0, dist.group.WORLD)
        b = funcol.all_gather_tensor(w2, 0, dist.group.WORLD)
        h = torch.relu(x @ a.T)
        o = torch.tanh(h @ b)
        return funcol.reduce_scatter_tensor(o, "sum", 0, dist.group.WORLD).sum()

    return _trace(f, torch.randn(16, 64), torch.randn(16, 64), torch.randn(32, 64))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_each_collective_kind_and_two_groups():
    from overlapsat.torch.fx import import_fx

    g = import_fx(every_collective())
    colls = {nd.name: nd for nd in g.nodes if nd.kind is NodeKind.COLLECTIVE}
    assert {nd.op for nd in colls.values()} == {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}
    ag = colls["all_gather_into_tensor"]
    w = _world()
    assert (ag.group_size, ag.nbytes) == (w, w * 8 * 16 * 4)  # the gathered output: w shards of 8x16 fp32
    assert colls["all_reduce"].group_size == 2 and colls["all_reduce"].group != ag.group  # two groups
    co = g.index["all_gather_into_tensor_coalesced"]
    assert [g.names[w] for w in g.waits_of[co]] == ["wait_tensor_4", "wait_tensor_5"]  # one collective, two waits
    assert colls["all_gather_into_tensor_coalesced"].nbytes == (16 * 16 + 8 * 16) * 4  # both tensors, one transfer
    assert g.nodes[g.index["permute"]].duration == 0.0 and g.nodes[g.index["mm"]].duration > 0  # a view is free
    # a GEMM's FLOPs from torch's formula: x (8x16) @ gathered.T (16 x 8w) = 2 * 8 * 16 * 8w (they were 0 once,
    # a silent failure, which priced every GEMM by its bytes alone)
    assert g.nodes[g.index["mm"]].flops == 2 * 8 * 16 * 8 * w
    assert all(nd.duration > 0 for nd in colls.values())
    assert validate(g, g.input_order) == []


def test_waits_and_launches_cost_the_compute_stream():
    """decisions.md 17: import_fx prices a collective's launch and a wait's own time (the profile's by default)."""
    from overlapsat.torch.fx import import_fx

    gm = _trace_plain()
    free = import_fx(gm)
    assert not free.has_stream_costs  # the built-in profile's are 0 until measured
    g = import_fx(gm, launch_us=3.0, wait_us=1.5)
    colls = [nd for nd in g.nodes if nd.kind is NodeKind.COLLECTIVE]
    waits = [nd for nd in g.nodes if nd.kind is NodeKind.WAIT]
    assert colls and all(nd.launch == 3.0 for nd in colls) and all(nd.duration == 1.5 for nd in waits)
    assert all(nd.launch == 0.0 for nd in g.nodes if nd.kind is not NodeKind.COLLECTIVE)
    assert g.compute_total == pytest.approx(free.compute_total + 3.0 * len(colls) + 1.5 * len(waits))
    # the same order costs at least the added work more (it may stall less where a launch delays a wait)
    assert simulate(g).makespan >= simulate(free).makespan
    with pytest.raises(GraphError, match="launch_us must be a finite number >= 0"):
        import_fx(gm, launch_us=-1.0)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_memory_per_storage_against_a_hand_computed_case():
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat.torch.fx import import_fx

    def f(primals, x):
        a = x * primals  # 256 B, fresh
        v = a.view(64)  # a view: the same storage
        b = v + 1  # 256 B, fresh; a's storage is free after it
        y = funcol.all_gather_tensor(b, 0, dist.group.WORLD)  # w ranks: 256 w B
        return y.sum()  # 4 B, the output

    g = import_fx(_trace(f, torch.randn(8, 8), torch.randn(8, 8)), inline=False)  # each output stored
    r = simulate(g)
    # before: x (256, a freeable input; primals is a parameter: outside the peak)
    # mul: 512, then x freed -> 256; view: 256; add: 512, then a freed -> 256; all_gather: 256 + 256 w, and b
    # stays: the collective reads it until it completes (decision 18); wait: an alias -> 256 + 256 w, then b
    # freed -> 256 w; sum: 256 w + 4, the gathered buffer freed -> 4
    w = _world()
    assert r.mem_post_alloc == [512, 256, 512, 256 + 256 * w, 256 + 256 * w, 256 * w + 4]
    assert r.peak_memory == max(512, 256 + 256 * w)
    assert g.meta["primals_bytes"] == 256


def test_tangents_are_held_until_the_graph_returns():
    """A backward graph's `tangents_*` are held by autograd's caller for the whole call (on 2 H200s the
    loss's gradient was live at the backward graph's peak, after its last reader: benchmarks/results/gpu_runs.md, runs
    36-42; decisions.md 23): counted from the start, never released. A saved activation is released after
    its last reader."""
    from overlapsat.torch.fx import import_fx

    def f(saved, tangents_1):
        a = saved * tangents_1  # 256 B; both inputs read for the last time
        b = a + 1  # 256 B; a freed after
        return b.sum()  # 4 B, the output; b freed after

    g = import_fx(_trace(f, torch.randn(8, 8), torch.randn(8, 8)), inline=False)  # each output stored
    held = [b for b in g.buffers if b.producer is None and b.output]
    assert [b.name.split("#")[0].startswith("tangents") for b in held] == [True]
    # before: saved 256 + tangent 256; mul: +256 = 768, saved freed -> 512; add: +256 = 768, a freed -> 512;
    # sum: +4 = 516, b freed -> 260 (a freeable tangent would give 768, 512, 260)
    assert simulate(g).mem_post_alloc == [768, 768, 516]


def test_unsupported_and_unmatched_nodes_are_named():
    import torch.fx as fx

    from overlapsat.torch.fx import import_fx

    class Op:
        namespace = "_c10d_functional"
        _opname = __name__ = "frobnicate"

        def __call__(self, *a):
            return a

    gr = fx.Graph()
    x = gr.placeholder("x")
    n = gr.call_function(Op(), (x, "0"))
    gr.output(n)
    with pytest.raises(GraphError, match="without meta"):  # no sizes: refused, never zeros
        import_fx(gr)
    x.meta["val"] = torch.empty(4)
    n.meta["val"] = torch.empty(4)
    with pytest.raises(GraphError, match="frobnicate"):
        import_fx(gr)


def test_a_second_wait_is_a_no_op_and_a_foreign_wait_is_refused():
    """wait_tensor(wait_tensor(all_reduce(x))), as an explicit wait after a traced funcol call gives (found
    by the tensor-parallel GPU step): the second wait returns its input at once, so it is a free node that
    aliases the collective's buffer. A wait on a graph input (a collective of another graph) stays refused."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch.fx as fx

    from overlapsat.torch.fx import import_fx

    def f(x, w):
        r = funcol.wait_tensor(funcol.all_reduce(x, "sum", dist.group.WORLD))
        return (r @ w).sum()

    gm = _trace(f, torch.randn(8, 16), torch.randn(16, 4))
    waits = [n.name for n in gm.graph.nodes if "wait_tensor" in str(n.target)]
    assert len(waits) == 2  # the trace really holds two waits
    g = import_fx(gm)
    kinds = {nd.name: nd.kind for nd in g.nodes}
    assert [kinds[w] for w in waits] == [NodeKind.WAIT, NodeKind.COMPUTE]
    assert g.nodes[g.index[waits[1]]].duration == 0
    assert validate(g, g.input_order) == []
    (buf,) = [b for b in g.buffers if b.producer is not None and b.producer.startswith("all_reduce")]
    mm = next(nd.name for nd in g.nodes if nd.name.startswith("mm"))
    assert mm in buf.consumers  # the matmul reads the collective's buffer through both waits

    gr = fx.Graph()
    x = gr.placeholder("x")
    w = gr.call_function(torch.ops._c10d_functional.wait_tensor.default, (x,))
    gr.output(w)
    x.meta["val"] = w.meta["val"] = torch.empty(4)
    with pytest.raises(GraphError, match="waits on no collective"):
        import_fx(gr)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_overlap_scheduler_is_a_row_and_never_beats_the_result():
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_peer import available, overlap_scheduler_order

    if not available():
        pytest.skip("this torch has no FX overlap scheduler")
    gm = every_collective()
    g = import_fx(gm)
    before = [n.name for n in gm.graph.nodes]
    peer = overlap_scheduler_order(gm, g)
    assert [n.name for n in gm.graph.nodes] == before  # the FX graph is put back as it came
    if peer is None:  # torch 2.13's scheduler fails an assertion on coalesced collectives: no row, no crash
        gm = _trace_plain()
        g = import_fx(gm)
        peer = overlap_scheduler_order(gm, g)
    assert peer is not None and sorted(peer) == sorted(g.names)
    c = compare(g, time_limit=2, collective_order="free", extra_orders={"overlap_scheduler": peer})
    row = c.row("overlap_scheduler")
    assert row.makespan == pytest.approx(simulate(g, peer).makespan)
    if row.valid:
        assert c.exact.makespan <= row.makespan + 1e-9


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_bucketed_peer_is_another_graph():
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_peer import available, bucketed

    if not available():
        pytest.skip("this torch has no FX overlap scheduler")
    g = import_fx(_trace_plain())
    b = bucketed(_trace_plain(), g)  # a fresh trace: bucketing rewrites the graph
    assert b is not None and b.name.endswith("(bucketed)")
    assert b.counts()["collective"] <= g.counts()["collective"]
    assert validate(b, b.input_order) == [] and simulate(b).makespan > 0


def test_fx_pass_options_are_checked_and_keyed(tmp_path):
    """comm_slowdown and pin are validated, part of Inductor's cache key, and survive pickling."""
    import pickle

    from overlapsat.torch.fx_apply import FxSchedulePass

    base = FxSchedulePass(str(tmp_path))
    slow = FxSchedulePass(str(tmp_path), comm_slowdown=1.5, pin="all")
    assert base.uuid() != slow.uuid()
    back = pickle.loads(pickle.dumps(slow))
    assert (back.comm_slowdown, back.pin, back.uuid()) == (1.5, "all", slow.uuid())
    with pytest.raises(GraphError, match="comm_slowdown"):
        FxSchedulePass(str(tmp_path), comm_slowdown=0.5)
    with pytest.raises(GraphError, match="pin must be one of"):
        FxSchedulePass(str(tmp_path), pin="some")


def test_pointwise_chains_are_priced_as_fused():
    """mm -> relu -> mul -> add -> mm: the chain reads mm's output once and writes add's once; mul moves
    nothing of its own (fusion=False prices each op alone: read and write 64x32 fp32 each)."""
    from overlapsat.torch.fx import import_fx

    def f(x, w):
        return ((torch.relu(x @ w) * 2 + 1) @ w.T).sum()

    gm = _trace(f, torch.randn(64, 32), torch.randn(32, 32))
    fused = {nd.name: nd for nd in import_fx(gm).nodes}
    alone = {nd.name: nd for nd in import_fx(gm, fusion=False).nodes}
    block = 64 * 32 * 4
    assert [fused[k].bytes_accessed for k in ("relu", "mul", "add")] == [block, 0, block]
    assert fused["mul"].duration == 0.0 and fused["relu"].duration > 0
    assert [alone[k].bytes_accessed for k in ("relu", "mul", "add")] == [2 * block] * 3
    assert fused["mm"].flops == alone["mm"].flops == 2 * 64 * 32 * 32


def test_cpu_flash_attention_gets_the_flash_formula():
    """A fake-tensor trace on CPU gives the CPU flash kernels, which torch's FLOP counter lacks: they take the
    GPU flash formulas (forward 4 b h s^2 d; backward 2.5 times that)."""
    from overlapsat.torch.fx import import_fx

    qkv = [torch.randn(2, 4, 128, 32, requires_grad=True) for _ in range(3)]

    def step(q, k, v):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum()
        return torch.autograd.grad(out, [q, k, v])

    g = import_fx(_trace(step, *qkv))
    att = {nd.name: nd.flops for nd in g.nodes if "attention" in nd.name}
    fwd = 4 * 2 * 4 * 128 * 128 * 32
    assert att == {"_scaled_dot_product_flash_attention_for_cpu": fwd,
                   "_scaled_dot_product_flash_attention_for_cpu_backward": 2.5 * fwd}



def test_a_collective_holds_its_input_until_its_wait_and_is_still_prefetched():
    """Decision 18 on a 2-rank trace: the reduce_scatter's input (otherwise dead once the collective is issued)
    is read by the wait, so sinking the wait keeps it alive; and the solver still hides the first all_gather
    behind the independent matmul (it issues it first)."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import optimize
    from overlapsat.torch.fx import import_fx

    def step(w1, x):
        a = funcol.all_gather_tensor(w1, 0, dist.group.WORLD)
        h = torch.relu(x @ x.T)
        g = torch.tanh(h @ a)  # 16 x 16 floats: 1 KiB
        return funcol.reduce_scatter_tensor(g, "sum", 0, dist.group.WORLD).sum()

    g = import_fx(_trace(step, torch.randn(8, 16), torch.randn(16, 16)))
    rs = next(n.name for n in g.nodes if n.name.startswith("reduce_scatter"))
    wait = g.names[g.waits_of[g.index[rs]][0]]
    held = [b for b in g.buffers if rs in b.consumers]
    assert held and all(wait in b.consumers for b in held)
    r = optimize(g, time_limit=2)
    assert g.names[r.order[0]].startswith("all_gather")


def _attention_backward_graph(device: str):
    """grad_q, grad_k, grad_v = cuDNN attention backward(...); returns grad_q + 1. Built by hand: the op needs a
    CUDA tensor, so every value is a fake tensor on `device` (no GPU needed)."""
    import operator

    import torch.fx as fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default
    b, h, s, d = 1, 2, 16, 8
    g = fx.Graph()
    with FakeTensorMode():
        def ph(name, *shape, dtype=torch.bfloat16):
            n = g.placeholder(name)
            n.meta["val"] = torch.empty(shape, device=device, dtype=dtype)
            return n

        go, q, k, v, o = (ph(nm, b, h, s, d) for nm in ("go", "q", "k", "v", "out"))
        lse = ph("lse", b, h, s, 1, dtype=torch.float32)
        seed, off = ph("seed", dtype=torch.int64), ph("off", dtype=torch.int64)
        bias = ph("bias", 0)
        args = (go, q, k, v, o, lse, seed, off, bias, bias, bias, s, s, 0.0, True)
        bwd = g.call_function(op, args)
        bwd.meta["val"] = op(*(a.meta["val"] if isinstance(a, fx.Node) else a for a in args))
        grads = []
        for i in range(3):
            gi = g.call_function(operator.getitem, (bwd, i))
            gi.meta["val"] = bwd.meta["val"][i]
            grads.append(gi)
        add = g.call_function(torch.ops.aten.add.Tensor, (grads[0], 1))
        add.meta["val"] = grads[0].meta["val"] + 1
    g.output((add, grads[1], grads[2]))
    return g, 4 * b * h * s * d + 4 * b * h * s


def test_cudnn_attention_backward_workspace_is_counted_at_its_node():
    """cuDNN's attention backward allocates an fp32 dQ accumulator and fp32 row statistics inside the kernel
    (the allocator saw exactly 4bhsd + 4bhs bytes on H200s, benchmarks/results/gpu_runs.md runs 36, 37 and 40): the
    importer counts them at that node and frees them there, so a budget covers them; on CPU tensors (another
    kernel) and with `workspaces=None`, nothing."""
    from overlapsat.torch.fx import import_fx

    g, ws = _attention_backward_graph("cuda")
    assert ws == 4 * 1 * 2 * 16 * 8 + 4 * 1 * 2 * 16 == 1152
    with_ws, without = import_fx(g), import_fx(g, workspaces=None)
    [buf] = [b for b in with_ws.buffers if b.name.endswith("#workspace")]
    assert buf.consumers == () and buf.size_alloc == buf.size_free == ws and not buf.output
    r, r0 = simulate(with_ws), simulate(without)
    # inputs before: five bf16 (1, 2, 16, 8) tensors of 512 B, lse 128 B, two int64 scalars 8 B, bias 0 B;
    # the backward allocates three 512 B gradients, then frees every input it last reads (all of them)
    inputs = 5 * 512 + 128 + 2 * 8
    assert r0.mem_post_alloc[0] == inputs + 3 * 512
    assert r.mem_post_alloc[0] == inputs + 3 * 512 + ws
    assert r.peak_memory == r0.peak_memory + ws  # the backward's step is the peak either way
    assert r.mem_post_alloc[1:] == r0.mem_post_alloc[1:]  # released at its own step
    validate(with_ws, [n.name for n in with_ws.nodes])
    g_cpu, _ = _attention_backward_graph("cpu")
    assert not [b for b in import_fx(g_cpu).buffers if b.name.endswith("#workspace")]


def test_an_op_with_no_result_needs_no_val_and_holds_no_memory():
    """torch 2.11's bucket merge copies a bucket's inputs in with `_foreach_copy_` and leaves that node without
    meta['val'] (seen on H100s, 2026-11-26): its schema returns nothing, so it has nothing to size and is
    imported as a kernel with no output. A node that does return something still needs its val."""
    from overlapsat.torch.fx import import_fx

    def f(a, b):
        buf = torch.empty(12)
        dst = list(torch.split(buf, [4, 8]))
        torch._foreach_copy_(dst, [a, b])
        return buf * 2

    gm = _trace(f, torch.randn(4), torch.randn(8))
    (fc,) = [n for n in gm.graph.nodes if "foreach_copy" in str(n.target)]
    fc.meta.pop("val", None)  # as torch 2.11's merge leaves it
    g = import_fx(gm)
    assert fc.name in g.index
    assert [b for b in g.buffers if b.producer == fc.name and b.size_alloc > 0] == []
    mul = next(n for n in gm.graph.nodes if n.op == "call_function" and "mul" in str(n.target))
    mul.meta.pop("val")
    with pytest.raises(GraphError, match="without meta.*" + mul.name):
        import_fx(gm)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_size_query_of_a_collectives_output_need_not_wait():
    """Decision 78: `aten.sym_size.int` of an all_to_all's output (torchtitan's EP overlap pass reads the token
    count so, before the wait) reads no data: it follows the collective's launch, not its wait, and holds no
    buffer. A real reader of the same output still follows the wait."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat.torch.fx import import_fx

    def f(x, w):
        t = funcol.all_to_all_single(x, None, None, dist.group.WORLD)
        return (t @ w).sum()

    gm = _trace(f, torch.randn(8, 16), torch.randn(16, 4))
    a2a = next(n for n in gm.graph.nodes if "all_to_all_single" in str(n.target))
    with gm.graph.inserting_after(a2a):
        size = gm.graph.call_function(torch.ops.aten.sym_size.int, (a2a, 0))
    size.meta["val"] = 8
    g = import_fx(gm)
    (buf,) = [b for b in g.buffers if b.producer == a2a.name]
    assert size.name not in buf.consumers and any(c.startswith("mm") for c in buf.consumers)
    names = [nd.name for nd in g.nodes]
    wait = next(nm for nm in names if nm.startswith("wait_tensor"))
    order = [nm for nm in names if nm != size.name]
    early = order[:order.index(a2a.name) + 1] + [size.name] + order[order.index(a2a.name) + 1:]
    assert early.index(size.name) < early.index(wait) and validate(g, early) == []
    before = [size.name] + order  # before its collective: the FX edge still holds it
    assert any(v.kind == "dependency" for v in validate(g, before))


def test_an_output_inductor_computes_inside_its_readers_kernel_holds_no_memory():
    """Decision 82, hand-computed: a pointwise op read by exactly one pointwise op or reduction is computed inside
    that reader's kernel, so it allocates nothing and its inputs live until that kernel; an output read twice, or
    read by a matmul, is stored."""
    from overlapsat.torch.fx import import_fx

    def f(x, w):
        a = x * 2  # read by b only: inlined
        b = a + 1  # read by the matmul: stored, 256 B
        c = b @ w  # 256 B
        d = x.exp()  # read twice: stored, 256 B
        e = d + c  # read by the product only: inlined
        return (d * e).sum()  # the product read by the sum only: inlined; the sum 4 B

    gm = _trace(f, torch.randn(8, 8), torch.randn(8, 8))
    g = import_fx(gm, inline=True)
    assert sorted(b.producer for b in g.buffers if b.producer) == ["add", "exp", "mm", "sum_1"]
    # x and w (256 B each, freeable inputs) from the start; x is read through `a` by b's kernel and by exp
    # mul: 512; add: +256 = 768; mm: +256 = 1024, then b and w freed -> 512; exp: +256 = 768, x freed -> 512;
    # add_1, mul_1: nothing; sum: +4 = 516, then c and d freed (read through the inlined ops) -> 4
    assert simulate(g).mem_post_alloc == [512, 768, 1024, 768, 512, 512, 516]
    assert len(import_fx(gm).buffers) == len(g.buffers) + 3  # the default counts every output


def _model_against_allocator(f, *args) -> tuple[int, int, int]:
    """`f` compiled on CPU: MODEL.md's peak of its post-grad graph above its inputs with `inline=True` and
    without, and the CPU allocator's largest holding while the compiled `f` runs (its own events)."""
    import torch._inductor.config as icfg
    from torch.profiler import ProfilerActivity, profile

    from overlapsat.simulate import peak_memory
    from overlapsat.torch.fx import import_fx

    got = {}

    def grab(graph):
        inputs = sum(n.meta["val"].nbytes for n in graph.nodes if n.op == "placeholder")
        got["model"] = peak_memory(import_fx(graph, inline=True)) - inputs
        got["counted"] = peak_memory(import_fx(graph)) - inputs

    with icfg.patch(post_grad_custom_post_pass=grab, force_disable_caches=True):
        fc = torch.compile(f)
        fc(*args)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fc(*args)
    real = max(e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0)
    return got["model"], got["counted"], real


def test_an_inlined_product_is_not_counted_where_the_allocator_never_holds_it():
    """Against the CPU allocator, independent of the model: a broadcast product (1 MiB) that Inductor computes
    inside the reduction reading it is never allocated; counting it (the default) reads the peak 1 MiB high."""

    def f(x, y):
        return (x.unsqueeze(1) * y.unsqueeze(0)).sum(1)  # (64, 64, 64) fp32 product, (64, 64) result

    model, counted, real = _model_against_allocator(f, torch.randn(64, 64), torch.randn(64, 64))
    assert real == 64 * 64 * 4 and model == real, (model, real)  # the one allocation: the (64, 64) result
    assert counted >= 64 * 64 * 64 * 4  # the product counted, 64 times what is held


def test_a_value_read_twice_is_inlined_where_inductor_recomputes_it():
    """Decision 87, against the CPU allocator: a broadcast product (1 MiB) read by two pointwise ops, whose
    product a reduction reads, reads two tensors and is small, so Inductor recomputes it in its readers' kernel
    instead of storing it; the rule inlines it, and the model's peak is what the allocator holds. Under the
    one-reader rule the product was counted (1 MiB high)."""

    def f(x, y):
        p = x.unsqueeze(1) * y.unsqueeze(0)  # (64, 64, 64) fp32, read by the two ops below
        return ((p + 1.0) * (p * 2.0)).sum(1)

    model, counted, real = _model_against_allocator(f, torch.randn(64, 64), torch.randn(64, 64))
    assert real == 64 * 64 * 4 and model == real, (model, real)
    assert counted >= 64 * 64 * 64 * 4


def test_a_complex_value_is_never_inlined():
    """Inductor generates no code for complex operators (it calls eager, which stores each result): on the CPU
    allocator a complex product read twice is held (512 KiB). The rule inlines no op with a complex input or
    output, so the model is not low (before, it read 8 B: torchtitan's rotary tables, 2026-11-30)."""

    def f(x, y):
        c = torch.view_as_complex(x) * torch.view_as_complex(y)  # (256, 256) complex64, read twice
        return torch.view_as_real(c * 2.0).sum() + torch.view_as_real(c.conj() + 1.0).sum()

    model, _, real = _model_against_allocator(f, torch.randn(256, 256, 2), torch.randn(256, 256, 2))
    assert real >= 256 * 256 * 8 and model >= real, (model, real)
