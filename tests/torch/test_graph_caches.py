"""The compile tests' cache settings (`tests/torch/scripts.py`): the graph caches are off, so a second compile of
the same graph runs every pass again, and the compiled kernels' cache is on, so it compiles no kernel again."""

import pytest

torch = pytest.importorskip("torch")

from tests.torch.scripts import graph_caches_off  # noqa: E402


def test_a_second_compile_runs_the_passes_again_and_reuses_the_kernels(tmp_path, monkeypatch):
    import torch._inductor.config as icfg
    from torch._dynamo.utils import counters
    from torch._inductor.custom_graph_pass import CustomGraphPass

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    seen = []
    before = icfg.fx_graph_cache

    class Counting(CustomGraphPass):  # a uuid: with the graph caches on, the second compile would hit them
        def __call__(self, g):
            seen.append(len(g.nodes))

        def uuid(self):
            return "counting"

    def f(x):
        return torch.tanh(x) * 2 + 1

    x = torch.randn(64)
    kernels = []
    for _ in range(2):
        torch._dynamo.reset()
        counters.clear()
        with graph_caches_off(), icfg.patch(post_grad_custom_post_pass=Counting()):
            torch.compile(f)(x)
        kernels.append(sum(1 for p in tmp_path.rglob("*.so")))
        assert not any("hit" in k for k in counters["inductor"]), dict(counters["inductor"])
        assert not any("hit" in k for k in counters["aot_autograd"]), dict(counters["aot_autograd"])
    assert len(seen) == 2  # the post-grad pass ran in both compiles
    assert kernels[0] >= 1 and kernels[1] == kernels[0]  # the second compile built no kernel
    assert icfg.fx_graph_cache == before  # as it was, outside the context
