"""Generators: deterministic, valid, the right communication, sizes to 100k."""

import pytest

from overlapsat import load_graph, simulate, validate
from overlapsat.examples import GENERATORS, bundled, generate


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_deterministic_and_valid(kind):
    g1, g2 = generate(kind, seed=7), generate(kind, seed=7)
    assert g1.fingerprint() == g2.fingerprint()
    assert generate(kind, seed=8).fingerprint() != g1.fingerprint()
    assert validate(g1, g1.input_order) == []
    r = simulate(g1)
    assert r.exposed > 0 and r.peak_memory > 0


def test_collectives_per_family():
    ops = lambda g: sorted({(n.op, n.group) for n in g.nodes if n.kind.value == "collective"})  # noqa: E731
    assert ops(generate("fsdp")) == [("all_gather", "dp"), ("reduce_scatter", "dp")]
    assert ops(generate("tp")) == [("all_reduce", "tp")]
    assert ops(generate("ddp")) == [("all_reduce", "dp")]
    assert ops(generate("moe")) == [("all_to_all", "ep")]


def test_fsdp_structure():
    g = generate("fsdp", layers=3, world=4)
    ags = [n for n in g.nodes if n.op == "all_gather"]
    rss = [n for n in g.nodes if n.op == "reduce_scatter"]
    assert len(ags) == 6 and len(rss) == 3  # fwd + bwd gather per layer, one reduce_scatter per layer
    assert all(n.group_size == 4 for n in ags)


def test_parameters_change_size():
    small = generate("tp", hidden=512, seq=256)
    big = generate("tp", hidden=2048, seq=256)
    assert simulate(big).peak_memory > simulate(small).peak_memory
    assert big.compute_total > small.compute_total


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_target_sizes(kind):
    g = generate(kind, nodes=2000)
    assert 1500 <= len(g) <= 2600


def test_bundled_examples_load():
    g = load_graph(bundled())
    assert len(g) > 20
