"""Data-dependent sizes priced at balanced routing (decision 89): an expert-parallel all_to_all's splits, read
from the data, are unbacked symbols when traced; each is its input rows over the group's size."""

import pytest

torch = pytest.importorskip("torch")

from overlapsat.torch.fx import import_fx  # noqa: E402


def _world() -> int:
    import torch.distributed as dist

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group(2)
    return dist.get_world_size()


def _sizes(g):
    return {b.name: b.size_alloc for b in g.buffers}


def _routed_step():
    """Forward and backward graphs of a routed matmul: tokens dispatched by all_to_all with splits read from
    `counts` (as torchtitan's expert parallelism does), a (4, 16) matmul and ReLU, combined back."""
    import torch._dynamo
    import torch.distributed._functional_collectives as funcol
    from torch._dynamo.backends.common import aot_autograd

    world = _world()
    grp = torch.distributed.group.WORLD
    graphs = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    def step(x, w, counts):
        send, recv = counts[:world].tolist(), counts[world:].tolist()
        y = funcol.all_to_all_single_autograd(x, recv, send, grp)
        z = torch.relu(y @ w)
        return funcol.all_to_all_single_autograd(z, send, recv, grp).sum()

    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 16, requires_grad=True)
    counts = torch.tensor([4] * world + [3] * world)  # the values play no part: sizes come from the trace
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        torch.compile(step, backend=aot_autograd(fw_compiler=keep, bw_compiler=keep), fullgraph=True)(
            x, w, counts).backward()
    torch._dynamo.reset()
    return graphs, world


def test_routed_sizes_are_their_input_rows_spread_evenly():
    (fwd, bwd), world = _routed_step()
    f = import_fx(fwd, name="routed forward")
    # 8 rows sent, so 8 // world per split, 8 rows received: by hand, fp32
    sizes = _sizes(f)
    assert sizes["all_to_all_single#0"] == 8 * 4 * 4  # the received tokens, 4 wide
    assert sizes["mm#0"] == sizes["relu#0"] == 8 * 16 * 4
    assert sizes["all_to_all_single_1#0"] == 8 * 16 * 4  # combined back
    assert f.meta["data_dependent_expected"] == f.meta["data_dependent_outputs"] > 0
    # the backward graph has no all_to_all whose input rows are known: it reads the forward's symbols, which
    # share its ShapeEnv
    b = import_fx(bwd, name="routed backward")
    sizes = _sizes(b)
    assert sizes["clone#0"] == 8 * 16 * 4 and sizes["all_to_all_single_3#0"] == 8 * 4 * 4
    assert b.meta["data_dependent_expected"] == b.meta["data_dependent_outputs"] > 0
    assert world == 2


def test_a_size_with_no_routing_to_read_still_counts_zero_bytes_and_says_so():
    """A data-dependent size no all_to_all explains (a boolean mask's selection) keeps decision 70's 0 bytes."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def pick(x):
        return (x[x > 0] * 2).sum()

    gm = make_fx(pick, tracing_mode="symbolic")(torch.randn(8))
    g = import_fx(gm, name="mask")
    sizes = _sizes(g)
    assert sizes["index#0"] == 0 and sizes["mul#0"] == 0
    assert g.meta["data_dependent_outputs"] == 2 and g.meta["data_dependent_expected"] == 0


def _fused_sizes(bind: bool) -> list[dict[str, int]]:
    """The buffers Inductor's fused nodes hold (the check after fusion's reading), per graph, for the routed
    step compiled by Inductor on the fake process group; `bind`: the FX import runs first, as install_fx's does."""
    import tempfile

    import torch._dynamo
    import torch._inductor.config as icfg
    import torch.distributed._functional_collectives as funcol

    from overlapsat.torch.after_fusion import _imported

    world = _world()
    grp = torch.distributed.group.WORLD
    fused: list[dict[str, int]] = []

    def post(gm):
        if bind:
            import_fx(gm, name="routed")

    def after(nodes):
        fused.append(_sizes(_imported(nodes)[0]))
        return nodes

    def step(x, w, counts):
        send, recv = counts[:world].tolist(), counts[world:].tolist()
        y = funcol.all_to_all_single_autograd(x, recv, send, grp)
        return funcol.all_to_all_single_autograd(torch.relu(y @ w), send, recv, grp).sum()

    x, w = torch.randn(8, 4, requires_grad=True), torch.randn(4, 16, requires_grad=True)
    torch._dynamo.reset()
    with tempfile.TemporaryDirectory() as cache, torch._dynamo.config.patch(capture_scalar_outputs=True), \
            icfg.patch(post_grad_custom_post_pass=post, _post_fusion_custom_pass=after, force_disable_caches=True), \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", cache)
        torch.compile(step, fullgraph=True)(x, w, torch.tensor([4] * 2 * world)).backward()
    torch._dynamo.reset()
    return fused


def test_the_reading_after_fusion_prices_routed_buffers_as_the_fx_model_does():
    """Inductor's buffers carry the same symbols: with the FX import's binding they hold the expected bytes (the
    received tokens' matmul output and its ReLU, 8 x 16 fp32 = 512 B, by hand); without it, 0, as before."""
    bound, unbound = _fused_sizes(True), _fused_sizes(False)
    assert len(bound) == len(unbound) == 2  # forward and backward
    for b, u in zip(bound, unbound):
        assert sorted(b) == sorted(u)  # the same buffers, only their sizes differ
        assert max(b.values()) == 8 * 16 * 4 and sum(b.values()) > sum(u.values())
    # unbound, most routed buffers count 0 bytes: fewer buffers hold any
    assert all(sum(v > 0 for v in u.values()) < sum(v > 0 for v in b.values()) for b, u in zip(bound, unbound))


def test_both_of_inductors_size_hints_see_the_binding_and_are_restored():
    """torch 2.13's memory planning sizes buffers with `optimization_hint`, torch 2.11's (the GPU machines') with
    `size_hint`: both read the bound symbols inside overlapsat's reading, and are Inductor's own again after."""
    import sympy
    from torch._inductor.virtualized import V

    from overlapsat.torch import routed

    class Env:  # a ShapeEnv stand-in: what the FX import bound is keyed by it
        pass

    class SizeVars:
        def __init__(self, env):
            self.shape_env = env

        def size_hint(self, expr, *, fallback=None):
            return int(expr) if expr.is_number else fallback

        def optimization_hint(self, expr, fallback=None):
            return int(expr) if expr.is_number else fallback

    env, u0, u1 = Env(), sympy.Symbol("u0"), sympy.Symbol("u1")
    routed._SEEN[env] = {u0: 4, u1: 4}
    sv = SizeVars(env)
    with V.set_graph_handler(type("G", (), {"sizevars": sv})()):
        with routed.inductor_sizes_bound():
            assert sv.size_hint(16 * u0 + 16 * u1, fallback=0) == 128
            assert sv.optimization_hint(16 * u0 + 16 * u1, fallback=0) == 128
        assert sv.size_hint(16 * u0, fallback=0) == 0 and sv.optimization_hint(16 * u0, fallback=0) == 0
        assert "size_hint" not in vars(sv) and "optimization_hint" not in vars(sv)
