"""JSON round trip, fingerprint stability, atomic writes, and bad files."""

import json
import os
import subprocess
import sys

import pytest

from overlapsat import (
    GraphError,
    load_graph,
    load_schedule,
    save_schedule,
    simulate,
)
from overlapsat.examples import fsdp_transformer, tp_transformer
from overlapsat.io import graph_to_dict, save_graph
from tests.helpers import random_graph, random_valid_order


def test_round_trip(tmp_path):
    g = tp_transformer(layers=1, seed=3)
    p = tmp_path / "g.json"
    save_graph(g, p)
    h = load_graph(p)
    assert h == g
    assert h.fingerprint() == g.fingerprint()
    assert simulate(h).makespan == simulate(g).makespan


def test_fingerprint_independent_of_node_order_and_layout(tmp_path):
    import random

    g = random_graph(11, 14, groups=2)
    d = graph_to_dict(g)
    # another valid input order with the same collective sequence, buffers shuffled, consumers reversed
    rng = random.Random(0)
    for _ in range(50):
        order = random_valid_order(g, rng, collective_order="global")
        if order != list(range(len(g))):
            break
    d2 = dict(d)
    d2["nodes"] = [d["nodes"][i] for i in order]
    d2["buffers"] = list(reversed([dict(b, consumers=list(reversed(b["consumers"]))) for b in d["buffers"]]))
    p = tmp_path / "g2.json"
    p.write_text(json.dumps(d2, indent=3))
    g2 = load_graph(p)
    assert g2.input_order != g.input_order
    assert g2.fingerprint() == g.fingerprint()
    assert g2 != g and g2.same_as(g) and g.same_as(g2)  # other fields, the same graph: the fingerprint decides


def test_fingerprint_sensitive_to_structure():
    g = random_graph(5, 10)
    g2 = g.with_durations({g.names[0]: g.dur[0] + 1})
    assert g2.fingerprint() != g.fingerprint()
    assert not g2.same_as(g) and g.same_as(g)


def test_fingerprint_stable_across_processes(tmp_path):
    g = fsdp_transformer(layers=1, seed=2)
    p = tmp_path / "g.json"
    save_graph(g, p)
    code = "import sys, overlapsat; print(overlapsat.load_graph(sys.argv[1]).fingerprint())"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == g.fingerprint()


def test_schedule_round_trip_and_checks(tmp_path):
    g = random_graph(3, 10)
    order = g.input_order
    p = tmp_path / "s.json"
    save_schedule(p, g, order, metrics={"makespan": simulate(g).makespan})
    s = load_schedule(p, g)
    assert s.order == order and s.graph_fingerprint == g.fingerprint()
    other = random_graph(4, 10)
    with pytest.raises(GraphError, match="fingerprint"):
        load_schedule(p, other)
    d = json.loads(p.read_text())
    d["order"] = order[:-1]
    p.write_text(json.dumps(d))
    with pytest.raises(GraphError, match="misses 1 node"):
        load_schedule(p, g)


def test_save_schedule_refuses_invalid_order(tmp_path):
    g = random_graph(3, 10)
    p = tmp_path / "s.json"
    with pytest.raises(GraphError, match="invalid"):
        save_schedule(p, g, list(reversed(g.input_order)))
    assert not p.exists()


@pytest.mark.parametrize(
    "content,match",
    [
        ("{not json", "not valid JSON"),
        ("[]", "top level must be a JSON object"),
        ('{"format": "other", "version": 1}', "'format' must be 'overlapsat-graph'"),
        ('{"format": "overlapsat-graph", "version": 99, "nodes": []}', "unsupported version 99"),
        ('{"format": "overlapsat-graph", "version": 1}', "missing field 'nodes'"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a"}]}', "node 'a': missing field 'kind'"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "gpu"}]}', "'gpu' is not one"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "compute", "duration": "5"}]}',
         r"node 'a'.duration: expected int or float"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "compute", "duration": NaN}]}',
         "duration nan"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "compute", "duration": 1}],'
         ' "buffers": [{"name": "b", "producer": "a", "size_alloc": 1.5}]}', r"buffer 'b'.size_alloc: expected int"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "compute", "duration": 1}],'
         ' "edges": [["a"]]}', r"edges\[0\]"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "compute"}]}',
         r"node 'a': missing field 'duration'"),
        ('{"format": "overlapsat-graph", "version": 1, "nodes": [{"name": "a", "kind": "collective", "group": "g"}]}',
         r"node 'a': missing field 'duration'"),
    ],
)
def test_bad_graph_files(tmp_path, content, match):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(GraphError, match=match) as ei:
        load_graph(p)
    assert "bad.json" in str(ei.value)


def test_missing_file():
    with pytest.raises(GraphError, match="does not exist"):
        load_graph("/nonexistent/graph.json")


def test_failed_save_keeps_old_file(tmp_path):
    g = random_graph(1, 6)
    p = tmp_path / "g.json"
    save_graph(g, p)
    before = p.read_text()
    bad = type(g)(g.nodes, g.buffers, g.edges, g.atomic_groups, g.name, {"x": object()})
    with pytest.raises(TypeError):
        save_graph(bad, p)
    assert p.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["g.json"]
    with pytest.raises(GraphError, match="does not exist"):
        save_graph(g, tmp_path / "nodir" / "g.json")


def test_gzip_graphs_and_corpus_files_load(tmp_path):
    """A .gz path is written compressed and read back; a corpus file (graph plus torch's orders) loads as its graph."""
    import glob
    import gzip

    from overlapsat import load_graph
    from overlapsat.examples import bundled

    g = load_graph(bundled("tp_small"))
    p = tmp_path / "g.json.gz"
    save_graph(g, str(p))
    assert gzip.open(p).read(1) == b"{"
    assert load_graph(str(p)).fingerprint() == g.fingerprint()
    corpus = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "benchmarks", "corpus", "*.json.gz")))
    assert corpus and all(len(load_graph(c)) > 20 for c in corpus)


G = '{"format": "overlapsat-graph", "version": 3, '


@pytest.mark.parametrize("content,match", [
    (G + '"nodes": [{"name": "a", "kind": "compute", "duraton": 3}]}', r"node 'a': unknown field 'duraton'"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1, "launch": 2}]}', r"node 'a': unknown field 'launch'"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1}], "bufers": []}', r"unknown field 'bufers'"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1}], '
         '"buffers": [{"name": "b", "producer": "a", "size": 5e9}]}', r"buffer 'b'.size: expected int, got float"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1}], '
         '"buffers": [{"name": "b", "producer": "a", "size": "5GiB"}]}', r"buffer 'b'.size: expected int, got str"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1e308}]}', r"node 'a': duration 1e\+308 must be"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1}], '
         '"buffers": [{"name": "b", "producer": "a", "size": 18446744073709551616}]}', r"buffer 'b': size_alloc .* 2\^62"),
    (G + '"nodes": [{"name": "a", "kind": "compute", "duration": 1}], '
         '"buffers": [{"name": "b", "producer": "a", "size": ' + "9" * 5000 + '}]}', r"digits|integer"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_values_past_the_ranges_and_unknown_fields_are_refused_by_name(tmp_path, content, match):
    """Once read silently as 0 (a float or string size, a misspelled duration), ignored (a compute node's launch),
    or an internal error (1e308, 2^64, 5,000 digits, 100,000 levels): each is now an error naming the culprit."""
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(GraphError, match=match) as ei:
        load_graph(p)
    assert "bad.json" in str(ei.value)
