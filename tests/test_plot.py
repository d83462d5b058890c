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
