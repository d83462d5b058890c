"""Buckets where the budget leaves room (solver/room.py, decision 76): never an invalid start, and the start that
gives a plan where torch's greedy buckets break the budget."""

import math
import random

import pytest

from overlapsat import Problem, peak_memory, validate
from overlapsat.graph import Buffer, Graph, Node, NodeKind
from overlapsat.plan import bucket_problems, laid_out, materialize
from overlapsat.solver.room import room_buckets
from tests.helpers import random_valid_order

C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT


def price(nd):
    """A latency of 5 us per collective and 1 us per kB; copies move 100 B per us."""
    return 5.0 + nd.nbytes / 1000 if nd.kind is K else nd.bytes_accessed / 100


def log_price(nd):
    """Prices that stay finite for buffers up to 2^50 B: a latency of 5 us and a microsecond per doubling."""
    return 5.0 + math.log2(1.0 + (nd.nbytes if nd.kind is K else nd.bytes_accessed))


def fsdp_step(seed: int) -> Graph:
    """A small FSDP-like step: per layer a gather (of a constant shard, or of one a kernel makes) read by the
    layer's kernel, whose activation backward reads; backward's gradients reduce-scattered into graph outputs.
    Sizes scaled by up to 2^40 (sums stay below 2^50 B), launch and wait costs on some seeds."""
    rnd = random.Random(seed)
    scale = 2 ** rnd.choice([0, 0, 10, 30, 40])
    k = rnd.choice([2, 3, 4])
    launch, wait = rnd.choice([0.0, 1.5]), rnd.choice([0.0, 0.5])
    nodes, bufs = [], []
    for i in range(k):
        if rnd.random() < 0.3:  # the shard comes from a kernel
            nodes.append(Node(f"s{i}", C, 1.0))
            bufs.append(Buffer(f"sh{i}", f"s{i}", (f"ag{i}",), 100 * scale, 100 * scale))
        nb = rnd.choice([1000, 4000, 8000]) * scale
        nodes += [Node(f"ag{i}", K, log_price(Node("x", K, 0.0, nbytes=nb)), group="dp", op="all_gather", nbytes=nb,
                       group_size=2, launch=launch),
                  Node(f"w{i}", W, wait, collective=f"ag{i}"), Node(f"m{i}", C, rnd.choice([2.0, 8.0, 20.0]))]
        bufs.append(Buffer(f"y{i}", f"ag{i}", (f"w{i}", f"m{i}"), nb, nb))
        act_readers = (f"m{i + 1}",) if i + 1 < k else ()
        bufs.append(Buffer(f"x{i}", f"m{i}", (*act_readers, f"b{i}"), rnd.choice([10, 200]) * scale,
                           rnd.choice([10, 200]) * scale))
    for i in reversed(range(k)):
        nb = rnd.choice([1000, 4000]) * scale
        nodes += [Node(f"b{i}", C, rnd.choice([2.0, 8.0, 20.0])),
                  Node(f"rs{i}", K, log_price(Node("x", K, 0.0, nbytes=nb)), group="dp", op="reduce_scatter", nbytes=nb,
                       group_size=2, launch=launch),
                  Node(f"v{i}", W, wait, collective=f"rs{i}")]
        bufs.append(Buffer(f"gr{i}", f"b{i}", (f"rs{i}",), nb, nb))
        bufs.append(Buffer(f"o{i}", f"rs{i}", (f"v{i}",), nb // 2, nb // 2, output=True))
        if i > 0:
            bufs.append(Buffer(f"g{i}", f"b{i}", (f"b{i - 1}",), 10 * scale, 10 * scale))
    return Graph(tuple(nodes), tuple(bufs), name=f"fsdp{seed}")


@pytest.mark.parametrize("seed", range(40))
def test_a_room_start_is_legal_within_its_cap_and_valid_within_the_budget(seed):
    """On random small steps, random valid orders, budgets from the order's exact peak up, and caps: the buckets
    are legal and within the cap, and the order read on their bucketed graph is valid within the budget (the
    library's validator, which shares nothing with the estimate); or there is no start. Both layouts."""
    rnd = random.Random(seed)
    g = fsdp_step(seed)
    order = random_valid_order(g, rnd, "free")
    peak = peak_memory(g, order)
    budget = peak + rnd.choice([0, 0, 1, peak // 4, peak])
    layout = "coalesced" if seed % 3 == 2 else "copy"
    problem = Problem.of(g, budget, "free", None, layout)
    price = laid_out(log_price, layout)
    cap = rnd.choice([math.inf, 9000 * 2 ** 40, 20000])
    room = room_buckets(problem, problem.relaxed, order, price, cap)
    if room is None:
        return
    assert room.buckets and not bucket_problems(g, room.buckets)
    assert all(sum(g.node(m).nbytes for m in b.members) <= cap for b in room.buckets)
    h = materialize(g, list(room.buckets), price)
    assert h.fingerprint() == room.graph.fingerprint()
    ids = h.order_indices(room.order)
    assert validate(problem.on(h), ids) == []
    assert peak_memory(h, ids) <= budget


@pytest.mark.parametrize("seed", range(12))
def test_where_the_estimate_is_wrong_the_check_keeps_only_what_is_valid(seed, monkeypatch):
    """With the estimate told that every bucket fits, the exact check must drop what breaks the budget (or give
    up): what it returns is still valid within the budget."""
    monkeypatch.setattr("overlapsat.solver.room._Grower.fits", lambda self, p: True)
    rnd = random.Random(seed)
    g = fsdp_step(seed)
    order = random_valid_order(g, rnd, "free")
    budget = peak_memory(g, order)
    problem = Problem.of(g, budget, "free")
    room = room_buckets(problem, problem.relaxed, order, log_price, math.inf)
    if room is not None:
        h = materialize(g, list(room.buckets), log_price)
        assert validate(problem.on(h), h.order_indices(room.order)) == []


def layers(k: int = 8) -> Graph:
    """k layers, each a gather of a 4,000-B weight (its shard a constant input of 2,000 B) read by a 5-us
    kernel, whose 10-B activation the next kernel reads; in input order one weight is live at a time."""
    nodes, bufs = [], []
    for i in range(k):
        nodes += [Node(f"ag{i}", K, 9.0, group="dp", op="all_gather", nbytes=4000, group_size=2),
                  Node(f"w{i}", W, collective=f"ag{i}"), Node(f"m{i}", C, 5.0)]
        bufs.append(Buffer(f"y{i}", f"ag{i}", (f"w{i}", f"m{i}"), 4000, 4000))
        bufs.append(Buffer(f"x{i}", f"m{i}", (f"m{i + 1}",) if i + 1 < k else (), 10, 10, output=i + 1 == k))
    return Graph(tuple(nodes), tuple(bufs), name="layers")


@pytest.mark.parametrize("budget, pairs", [
    (16_010, [("ag0", "ag1"), ("ag2", "ag3"), ("ag4", "ag5"), ("ag6", "ag7")]),
    (16_009, [("ag0", "ag1")]),
    (12_010, None),
])
def test_the_buckets_are_those_the_budget_leaves_room_for_by_hand(budget, pairs):
    """On the input order, by hand: a bucket of two gathers holds its 8,000-B gathered buffer from its copy-in
    (beside the 4,000 B of shards it concatenates there) to its copy-out, which writes the two 4,000-B weights
    beside it: 16,000 B, plus the 10-B activation of the layer before from the second bucket on. So 16,010 B
    leaves room for four pairs, one byte less only for the first (no activation is live yet), 12,010 B for none;
    a third member would need 24,000 B."""
    g = layers()
    problem = Problem.of(g, budget, "free")
    room = room_buckets(problem, problem.relaxed, list(range(len(g.nodes))), price, math.inf)
    if pairs is None:
        assert room is None
        return
    assert [b.members for b in room.buckets] == pairs
    h = materialize(g, list(room.buckets), price)
    ids = h.order_indices(room.order)
    assert validate(problem.on(h), ids) == [] and peak_memory(h, ids) == (16_010 if len(pairs) > 1 else 16_000)


def test_where_torchs_greedy_buckets_break_the_budget_a_room_start_is_judged_and_the_plan_keeps_within_it():
    """torch's greedy bucketer merges the eight gathers into one bucket (64,000 B at its copy-out): no order of it
    fits 16,100 B. A start within the budget is judged, and the plan (its buckets found from the starts) keeps
    within the budget, valid on its own bucketed graph, and is shorter than the best unbucketed order."""
    from overlapsat.solver.plan_search import optimize_plan

    def cheap_copies(nd):
        return 5.0 + nd.nbytes / 1000 if nd.kind is K else nd.bytes_accessed / 10_000

    g = layers()
    problem = Problem.of(g, 16_100, "free")
    r = optimize_plan(problem, cheap_copies, time_limit=5)
    starts = r.stats["plan"]["starts"]
    assert starts["torch greedy, 2000 MB"] == math.inf
    assert any(k.startswith("within the budget") and v < math.inf for k, v in starts.items())
    assert r.buckets and r.peak_memory <= 16_100
    assert validate(problem.on(r.bucketed), list(r.order)) == []
    assert r.makespan < r.plan_info.unbucketed_us


def test_the_room_starts_are_a_count_the_time_limit_allows_and_a_failure_costs_only_them(monkeypatch):
    """As many checks as ROOM_SHARE of the limit pays for at the ledger's price of one, in ROOM_CAPS_MB's order
    (here one: the first cap's); and where building them fails, the search goes on from the other starts and says
    so."""
    import overlapsat.solver.ledger as ledger
    import overlapsat.solver.plan_search as ps

    def cheap_copies(nd):
        return 5.0 + nd.nbytes / 1000 if nd.kind is K else nd.bytes_accessed / 10_000

    problem = Problem.of(layers(), 16_100, "free")
    monkeypatch.setitem(ledger.STEP_S, "room", (ps.ROOM_SHARE * 5, 0.0))  # one check in 5 s
    r = ps.optimize_plan(problem, cheap_copies, time_limit=5)
    assert [k for k in r.stats["plan"]["starts"] if k.startswith("within")] == \
        [f"within the budget, {ps.ROOM_CAPS_MB[0]:g} MB"]
    assert r.stats["plan"]["ledger"]["counts"]["room"] == 1

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(ps, "room_buckets", broken)
    r = ps.optimize_plan(problem, cheap_copies, time_limit=5)
    assert "boom" in r.stats["plan"]["room_error"] and r.peak_memory <= 16_100
    assert not any(k.startswith("within") for k in r.stats["plan"]["starts"])


def test_the_room_starts_are_made_where_other_starts_took_the_search_share(monkeypatch):
    """Decision 108: the starts within the budget's room are counted up to the end of judging (JUDGE_END), not
    to the end of the search's share, which the starts before them (here torch's greedy bucketer, priced at the
    whole share) or the caller's solved bucketings may take: they are the starts a budget most needs."""
    import overlapsat.solver.ledger as ledger
    import overlapsat.solver.plan_search as ps

    def cheap_copies(nd):
        return 5.0 + nd.nbytes / 1000 if nd.kind is K else nd.bytes_accessed / 10_000

    problem = Problem.of(layers(), 16_100, "free")
    monkeypatch.setitem(ledger.STEP_S, "greedy", (ps.SEARCH_SHARE * 5, 0.0))
    r = ps.optimize_plan(problem, cheap_copies, time_limit=5)
    assert any(k.startswith("within the budget") and v < math.inf for k, v in r.stats["plan"]["starts"].items())
    assert r.peak_memory <= 16_100


@pytest.mark.parametrize("seed", range(12))
def test_the_checks_a_room_start_makes_come_from_one_count(seed, monkeypatch):
    """Each exact check (and each repair) takes one from the count the plan search gives, so how many are made is
    the same on any machine: none left, no start; with the estimate told that every bucket fits (repairs needed),
    a start makes at most as many checks as it was given, and what it returns is still valid."""
    from overlapsat.solver.room import REPAIRS, Checks

    monkeypatch.setattr("overlapsat.solver.room._Grower.fits", lambda self, p: True)
    rnd = random.Random(seed)
    g = fsdp_step(seed)
    order = random_valid_order(g, rnd, "free")
    problem = Problem.of(g, peak_memory(g, order), "free")
    none = Checks(0)
    assert room_buckets(problem, problem.relaxed, order, log_price, math.inf, none) is None and none.left == 0
    free = Checks(100)
    whole = room_buckets(problem, problem.relaxed, order, log_price, math.inf, free)
    used = 100 - free.left
    assert used <= REPAIRS
    for k in range(1, used + 1):
        some = Checks(k)
        room = room_buckets(problem, problem.relaxed, order, log_price, math.inf, some)
        assert some.left == 0 or room is not None or k == used
        if k == used:
            assert (room is None) == (whole is None)
        if room is not None:
            h = materialize(g, list(room.buckets), log_price)
            assert validate(problem.on(h), h.order_indices(room.order)) == []
