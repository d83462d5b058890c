"""Timeline pictures render, are non-empty and of the expected size."""

import pytest

from overlapsat.examples import generate
from overlapsat.heuristics import best
from overlapsat.plot import _merge, plot_timeline


def test_png_size_and_content(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    g = generate("tp", seed=0)
    p = plot_timeline(g, [("input", g.input_order), ("best", best(g).order)], tmp_path / "t.png",
                      memory_budget="100000000B", width_px=1200, dpi=100)
    img = imread(p)
    assert img.shape[1] == 1200 and img.shape[0] > 300
    assert img[..., :3].std() > 0.05  # not blank


def test_large_graph_svg(tmp_path):
    pytest.importorskip("matplotlib")
    g = generate("fsdp", nodes=3000, seed=0)
    p = plot_timeline(g, g.input_order, tmp_path / "t.svg")
    assert (tmp_path / "t.svg").stat().st_size > 1000 and p.endswith(".svg")


def test_merge_sub_pixel_boxes():
    boxes = [(0.0, 0.1), (0.1, 0.1), (0.2, 0.1), (5.0, 2.0)]
    assert _merge(boxes, px=1.0) == [(0.0, pytest.approx(0.3)), (5.0, 2.0)]


def test_stall_bands_are_drawn_to_scale():
    """The drawn red area equals the stalled time at any zoom: a 0.1-px stall fills a tenth of its bin, and two
    stalls a pixel apart are not bridged (the old merge drew 40 % stalls on 12k nodes as most of the lane)."""
    from overlapsat.plot import _binned

    stalls = [(0.05, 0.1), (2.0, 0.3), (3.5, 1.0), (10.0, 0.25)]
    bins = _binned(stalls, px=1.0)
    assert sum(w * f for _, w, f in bins) == pytest.approx(sum(w for _, w in stalls))
    assert bins[0] == (0.0, 1.0, pytest.approx(0.1))
    assert [b for b, _, _ in bins] == [0.0, 2.0, 3.0, 4.0, 10.0]  # nothing drawn in 1.0-2.0 or 5.0-10.0


def test_the_picture_has_a_legend(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = []
    real = plt.Figure.savefig

    def grab(fig, *a, **k):
        seen.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        return real(fig, *a, **k)

    g = generate("tp", seed=0)
    plt.Figure.savefig = grab
    try:
        plot_timeline(g, g.input_order, tmp_path / "t.png")
    finally:
        plt.Figure.savefig = real
    assert "compute" in seen and any(t.startswith("stall") for t in seen)
    assert any(t.startswith("transfer, group") for t in seen)


def _small_plan():
    """fsdp_small priced for the H200 and one bucket of its first two all_gathers, with its bucketed graph."""
    from overlapsat.cost import cost_model
    from overlapsat.examples import bundled
    from overlapsat.io import load_graph
    from overlapsat.plan import Bucket, bucketable_by_key, materialize

    model = cost_model("h200")
    g = load_graph(bundled("fsdp_small")).reprice(model)
    rg = g.relaxed("free")
    gathers = next(cs for key, cs in bucketable_by_key(rg).items() if key[0] == "all_gather")
    bucket = Bucket(tuple(rg.names[c] for c in gathers[:2]))
    return g, materialize(rg, [bucket], model.duration), bucket


def test_a_plan_panel_draws_its_buckets_and_names_their_members(tmp_path):
    """#52: a plan's panel draws its own (bucketed) graph, each merged transfer hatched, and a legend entry per
    bucket naming its members."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from overlapsat.plot import bucket_label

    g, h, bucket = _small_plan()
    texts, hatched = [], []
    real = plt.Figure.savefig

    def grab(fig, *a, **k):
        texts.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        hatched.extend(p for ax in fig.axes for p in ax.patches if p.get_hatch() == "////")
        return real(fig, *a, **k)

    plt.Figure.savefig = grab
    try:
        plot_timeline(g, [("input order", g.input_order), ("plan", h.input_order, h, [bucket])], tmp_path / "p.png")
    finally:
        plt.Figure.savefig = real
    label = bucket_label(0, bucket, "all_gather")
    assert label in texts and all(m in label for m in bucket.members)
    assert len(hatched) == 1  # one merged transfer, in the plan's panel only
