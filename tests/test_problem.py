"""`Problem`: the graph, its budget in bytes and its collective-order policy, resolved once."""

import random
from dataclasses import replace

import pytest

from overlapsat import GraphError, Problem, load_graph, lower_bound, optimize, resolve_budget, validate
from overlapsat.examples import bundled
from overlapsat.heuristics import run_all
from overlapsat.simulate import peak_memory
from tests.helpers import random_valid_order


@pytest.fixture(scope="module")
def g():
    return load_graph(bundled("fsdp_small"))


def test_a_ratio_budget_is_resolved_once_and_exactly(g):
    p = Problem.of(g, "1.1x", "free")
    assert p.budget == resolve_budget(g, "1.1x") == int(peak_memory(g) * 11 // 10)
    assert p.collective_order == "free" and p.graph is g


@pytest.mark.parametrize("bad", [dict(budget=1.5), dict(budget="1.1x"), dict(budget=-1), dict(collective_order="x")])
def test_bad_fields_are_refused_by_name(g, bad):
    with pytest.raises(GraphError):
        Problem(g, **bad)


def test_the_views_are_the_graphs_own(g):
    p = Problem.of(g, "none", "group")
    assert p.relaxed is g.relaxed("group")
    assert sorted(p.canonical.graph.names) == sorted(g.names)
    assert [p.relaxed.names[v] for v in p.to_given] == p.canonical.graph.names


def test_the_canonical_form_does_not_depend_on_the_file_order(g):
    order = random_valid_order(g, random.Random(3))
    h = replace(g, nodes=tuple(g.nodes[i] for i in order), meta=dict(g.meta))
    assert Problem.of(h).canonical.graph.names == Problem.of(g).canonical.graph.names


def test_every_entry_point_takes_a_problem_and_gives_what_the_options_give(g):
    p = Problem.of(g, "1.2x", "global")
    budget = resolve_budget(g, "1.2x")
    order = list(range(len(g.nodes)))
    assert validate(p, order) == validate(g, order, budget, collective_order="global")
    assert lower_bound(p) == lower_bound(g, "global")
    rows = [(r.name, r.makespan, r.valid) for r in run_all(p, work_limit=50_000)]
    assert rows == [(r.name, r.makespan, r.valid) for r in run_all(g, memory_budget=budget, collective_order="global",
                                                                   work_limit=50_000)]
    a = optimize(p, time_limit=5, work_limit=0.2)
    b = optimize(g, time_limit=5, work_limit=0.2, memory_budget=budget, collective_order="global")
    assert a.names == b.names and a.status == b.status and a.memory_budget == budget


def test_a_problem_is_not_given_its_options_twice(g):
    p = Problem.of(g, "none", "free")
    with pytest.raises(GraphError, match="carries its budget"):
        optimize(p, memory_budget=10)
    with pytest.raises(GraphError, match="differs"):
        optimize(p, collective_order="group")
    with pytest.raises(GraphError, match="carries its budget"):
        validate(p, list(range(len(g.nodes))), 10)


def test_the_bucket_cap_is_bytes_resolved_once_and_kept_on_every_view(g):
    """The bucket policy: a size string or bytes, refused by name when it is a ratio, bare, negative or a float;
    the views (another graph, the canonical form) keep it, and `over_cap` names each bucket above it."""
    from overlapsat.plan import Bucket

    p = Problem.of(g, "none", "group", "25MiB")
    assert p.bucket_cap == 25 * 2**20 and p.on(g).bucket_cap == p.bucket_cap and p.canonical.bucket_cap == p.bucket_cap
    assert Problem.of(g).bucket_cap is None and Problem.of(g, "none", "group", 4096).bucket_cap == 4096
    for bad in ("1.2x", "12", -1, 1.5, True):
        with pytest.raises(GraphError, match="bucket cap"):
            Problem.of(g, "none", "group", bad)
    with pytest.raises(GraphError, match="bucket_cap"):
        Problem(g, None, "group", -3)
    ags = [nd for nd in g.nodes if nd.op == "all_gather"][:2]
    b = Bucket(tuple(nd.name for nd in ags))
    total = sum(nd.nbytes for nd in ags)
    assert Problem(g, None, "group", total).over_cap([b]) == [] and Problem.of(g).over_cap([b]) == []
    (why,) = Problem(g, None, "group", total - 1).over_cap([b])
    assert b.name in why and f"{total:,} B" in why
