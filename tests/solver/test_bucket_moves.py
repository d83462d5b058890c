"""Bucket moves that keep the order (solver/bucket_moves.py): every move offered is a valid order of the
bucketed graph it makes, and the walk of it is the simulator's, on random graphs and random orders."""

import os
import random

import pytest

from overlapsat import Problem, simulate, validate
from overlapsat.plan import Bucket, materialize
from overlapsat.solver.bucket_moves import _Layout, _moves, order_preserving_search
from overlapsat.solver.plan_search import all_bucketings
from tests.helpers import random_valid_order
from tests.solver.test_joint import price, random_plan_graph, three_gathers

SEEDS = int(os.environ.get("OVERLAPSAT_MOVES_SEEDS", "30"))


def _apply(bs, edit):
    order, new, gone = edit[:3]
    return tuple(sorted([b for b in bs if b not in gone] + new, key=lambda b: b.members)), order


def _every_edit(g, bs, order):
    """Every move the search could offer from `bs` and `order` (stalled or not: the stall map only orders them;
    merges at either place) that the layout makes: the layout, the new buckets and order, and `materialize`'s
    graph of those buckets."""
    lay = _Layout(g, price, bs, order)
    pos = {nm: k for k, nm in enumerate(order)}
    for move in _moves(lay, {}, pos, early=True):
        edit = move()
        if edit is None:
            continue
        nbs, norder = _apply(bs, edit)
        yield lay, nbs, norder, materialize(g, list(nbs), price), edit


@pytest.mark.parametrize("seed", range(SEEDS))
def test_every_move_is_a_valid_order_of_its_bucketed_graph_and_walks_as_the_simulator(seed):
    """From every legal bucketing and a random valid order of it: each move the search would try (splits,
    merges of any neighbouring units at either place, drops) that the layout makes is a valid order of the bucketed graph
    `materialize` builds for the new buckets (level free), and the layout's walk equals `simulate` on it (its
    walk of the edited span alone, to rounding)."""
    g = random_plan_graph(seed)
    rng = random.Random(seed)
    checked = 0
    for bs in all_bucketings(g, 200):
        h = materialize(g, list(bs), price)
        order = [h.names[v] for v in random_valid_order(h, rng, "free")]
        assert _Layout(g, price, bs, order).walk(order)[0] == simulate(h, order).makespan
        for lay, nbs, norder, h2, edit in _every_edit(g, bs, order):
            assert sorted(norder) == sorted(h2.names)
            assert validate(Problem(h2, None, "free"), norder) == [], (bs, nbs)
            assert lay.walk(norder)[0] == simulate(h2, norder).makespan
            assert lay.walk_edit(edit) == pytest.approx(simulate(h2, norder).makespan, rel=1e-12, abs=1e-9)
            checked += 1
    if not checked:
        pytest.skip("no move applies")


def test_a_merge_whose_transfers_do_not_overlap_is_not_made():
    """Two gathers of one key, the first waited before the second is issued: merging them would need the order
    changed, not edited in place, so no merge is offered; where they overlap, it is."""
    g = three_gathers()
    serial = ["p0", "ag0", "w0", "m0", "p1", "ag1", "w1", "m1", "p2", "ag2", "w2", "m2"]
    lay = _Layout(g, price, (), serial)
    pos = {nm: k for k, nm in enumerate(serial)}
    assert lay.merge(lay.unit_of["ag0"], lay.unit_of["ag1"], pos) is None
    overlapped = ["p0", "ag0", "p1", "ag1", "w0", "m0", "w1", "m1", "p2", "ag2", "w2", "m2"]
    lay = _Layout(g, price, (), overlapped)
    pos = {nm: k for k, nm in enumerate(overlapped)}
    order, new, gone = lay.merge(lay.unit_of["ag0"], lay.unit_of["ag1"], pos)[:3]
    b = Bucket(("ag0", "ag1"))
    assert new == [b] and gone == [] and order[:5] == ["p0", "p1", b.nodes[0], b.name, b.nodes[2]]


def test_the_search_shortens_the_walk_and_its_order_is_valid():
    """From no buckets and an order that overlaps all three gathers, with a latency of 20 us a collective, the
    search merges them (one latency instead of three), and the order it returns is valid on the bucketed graph
    and walks to the makespan it reports."""
    g = three_gathers()
    order = ["p0", "ag0", "p1", "ag1", "p2", "ag2", "w0", "m0", "w1", "m1", "w2", "m2"]
    before = simulate(g, order).makespan
    r = order_preserving_search(g, price, (), order, max_moves=50)
    assert r.accepted >= 1 and r.makespan < before and r.buckets
    h = materialize(g, list(r.buckets), price)
    assert validate(Problem(h, None, "free"), r.order) == []
    assert simulate(h, r.order).makespan == r.makespan


def _gathers(k):
    """k independent gathers, each fed by a kernel and read by one, as three_gathers."""
    from overlapsat import Buffer, Graph, Node, NodeKind
    from tests.solver.test_joint import priced

    C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    nodes, bufs = [], []
    for i in range(k):
        nodes += [Node(f"p{i}", C, 5.0), Node(f"ag{i}", K, 0.0, group="dp", op="all_gather", nbytes=2000,
                                              group_size=2)]
        bufs.append(Buffer(f"x{i}", f"p{i}", (f"ag{i}",), 10, 10))
    for i in range(k):
        nodes += [Node(f"w{i}", W, collective=f"ag{i}"), Node(f"m{i}", C, 10.0)]
        bufs.append(Buffer(f"y{i}", f"ag{i}", (f"w{i}", f"m{i}"), 20, 20))
    return priced(Graph(tuple(nodes), tuple(bufs), name=f"gathers{k}"))


@pytest.mark.parametrize("level, budget", [("free", None), ("group", None), ("global", None), ("free", 10**6),
                                           ("group", 10**6), ("chain", None)])
def test_the_plan_search_runs_the_moves_at_every_level_and_budget(level, budget):
    """Eight gathers (too many bucketings to order each, too many collectives of one key for the joint model's
    every-bucket candidates): the moves run after the hill climb at every level, with or without a budget
    (decision 46), and the plan is valid at the problem's level and budget."""
    from overlapsat.solver.plan_search import optimize_plan

    g = _gathers(8)
    r = optimize_plan(Problem.of(g, budget, level), price, time_limit=3, max_evaluations=5)
    assert r.stats["plan"]["order_moves"]["tried"] > 0
    assert validate(Problem(r.bucketed, budget, level), list(r.plan.order)) == []


@pytest.mark.parametrize("seed", range(SEEDS))
def test_a_move_is_confirmed_exactly_when_its_plan_is_valid_at_the_level_and_budget(seed):
    """At levels group and global (the collective sequences compared, decision 46) and under a budget (the plan
    built and validated), the plan search's confirmation of a move agrees with `validate` on `materialize`'s
    graph, for every move offered from every legal bucketing and a random order valid at the level (the
    budget, where one is set, is that order's own peak). The moves are valid orders at free by construction
    (the test above)."""
    from overlapsat.solver.plan_search import _confirmer

    g = random_plan_graph(seed)
    rng = random.Random(seed)
    seen = {True: 0, False: 0}
    for level, tight in (("group", False), ("global", False), ("group", True), ("free", True)):
        for bs in all_bucketings(g, 200):
            h = materialize(g, list(bs), price)
            order = [h.names[v] for v in random_valid_order(h, rng, level)]
            budget_b = simulate(h, order).peak_memory if tight else None  # the order's own peak: exactly at it
            problem = Problem.of(g, budget_b, level)
            confirm = _confirmer(problem, price)
            for _, nbs, norder, h2, _ in _every_edit(g, bs, order):
                truth = validate(Problem(h2, budget_b, level), norder) == []
                assert confirm(nbs, norder) == truth, (level, budget_b, bs, nbs)
                seen[truth] += 1
    if not seen[False]:
        pytest.skip("no move was invalid at a level here")


def _with_reduce_between():
    """Gathers a0 and a2 with a reduce-scatter r1 of the same group between them in input order, their inputs
    made first: a bucket of a0 and a2 comes before r1 in the group's sequence (its first member's place; were
    a2's input made after r1, the bucket would come after it)."""
    from overlapsat import Buffer, Graph, Node, NodeKind
    from tests.solver.test_joint import priced

    C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    nodes, bufs, colls = [], [], []
    for i, op in enumerate(("all_gather", "reduce_scatter", "all_gather")):
        nm = f"{'a' if op == 'all_gather' else 'r'}{i}"
        nodes.append(Node(f"p{i}", C, 5.0))
        colls.append(Node(nm, K, 0.0, group="dp", op=op, nbytes=2000, group_size=2))
        bufs.append(Buffer(f"x{i}", f"p{i}", (nm,), 10, 10))
    nodes += colls
    for i, nm in enumerate(("a0", "r1", "a2")):
        nodes += [Node(f"w{i}", W, collective=nm), Node(f"m{i}", C, 10.0)]
        bufs.append(Buffer(f"y{i}", nm, (f"w{i}", f"m{i}"), 20, 20))
    return priced(Graph(tuple(nodes), tuple(bufs), name="reduce_between"))


def test_a_split_the_group_sequence_forbids_is_left_out_and_would_be_refused():
    """Bucket (a0, a2) is issued before r1, as its group's sequence has it. Split in place, a2 stays before r1,
    while the split graph's sequence puts a2 after r1: at level group the split is left out (and `validate`
    refuses it), at free it is made and valid."""
    from overlapsat.solver.plan_search import _sequences

    g = _with_reduce_between()
    b = Bucket(("a0", "a2"))
    h = materialize(g, [b], price)
    order = list(h.names)
    assert order.index(b.name) < order.index("r1")
    free = _Layout(g, price, (b,), order)
    edit = free.split(free.unit_of["a0"], [("a0",), ("a2",)])
    assert validate(Problem(g, None, "free"), edit[0]) == []
    assert validate(Problem(g, None, "group"), edit[0]) != []
    group = _Layout(g, price, (b,), order, _sequences(Problem.of(g, "none", "group")))
    assert group.split(group.unit_of["a0"], [("a0",), ("a2",)]) is None


def test_an_early_merge_takes_the_earlier_collectives_place_unless_the_later_ones_inputs_come_after_it():
    """Merged at the earlier gather's place, the copy-in and collective of (a0, a2) come before r1, as the
    group's sequence has them; where a2's input is made after a0's place, the early merge is refused."""
    g = _with_reduce_between()
    order = ["p0", "p1", "p2", "a0", "r1", "a2", "w0", "m0", "w1", "m1", "w2", "m2"]
    lay = _Layout(g, price, (), order)
    pos = {nm: k for k, nm in enumerate(order)}
    out, new, _ = lay.merge(lay.unit_of["a0"], lay.unit_of["a2"], pos, early=True)[:3]
    b = Bucket(("a0", "a2"))
    assert new == [b] and out[3:6] == [b.nodes[0], b.name, "r1"]
    h = materialize(g, [b], price)
    assert validate(Problem(h, None, "group"), out) == []
    late = lay.merge(lay.unit_of["a0"], lay.unit_of["a2"], pos).order
    assert late[3:6] == ["r1", b.nodes[0], b.name] and validate(Problem(h, None, "group"), late) != []
    order2 = ["p0", "a0", "p1", "r1", "p2", "a2", "w0", "m0", "w1", "m1", "w2", "m2"]
    lay2 = _Layout(g, price, (), order2)
    pos2 = {nm: k for k, nm in enumerate(order2)}
    assert lay2.merge(lay2.unit_of["a0"], lay2.unit_of["a2"], pos2, early=True) is None  # p2 comes after a0


def test_a_failure_in_the_moves_or_the_joint_model_keeps_the_searchs_plan(monkeypatch):
    """A bug inside the bucket moves or the joint model (here: each raises) is logged and contained: the plan
    search still returns a valid plan, and says what failed."""
    import importlib

    from overlapsat.solver import plan_search

    def boom(*a, **k):
        raise KeyError("bug")

    monkeypatch.setattr(importlib.import_module("overlapsat.solver.climb"), "order_preserving_search", boom)
    monkeypatch.setattr(plan_search, "solve_joint", boom)
    g = _gathers(8)
    r = plan_search.optimize_plan(Problem.of(g, "none", "free"), price, time_limit=2, max_evaluations=5)
    ps = r.stats["plan"]
    assert ps["order_moves"] == {"error": "KeyError: 'bug'"} and ps["joint"]["error"] == "KeyError: 'bug'"
    assert validate(Problem(r.bucketed, None, "free"), list(r.plan.order)) == []


def test_a_split_whose_parts_waits_depend_on_each_other_is_not_made():
    """Four gathers in one bucket whose waits depend on each other (w1 before w0, w3 before w2): splitting it in
    place puts the parts' waits together at the bucket's wait and their copy-outs after them, which would run a
    wait before what it depends on. Such a split was offered and its order was invalid; now it is refused, and
    each split that is made is a valid order of its bucketed graph."""
    from tests.solver.test_joint import priced
    from tests.test_plan import dependent_waits

    g = priced(dependent_waits())
    b = Bucket(("a0", "a1", "a2", "a3"))
    h = materialize(g, [b], price)
    lay = _Layout(g, price, (b,), list(h.names))
    u = lay.unit_of["a0"]
    assert lay.split(u, [("a0",), ("a1",), ("a2",), ("a3",)]) is None  # w0 would run before w1
    assert lay.split(u, [("a0", "a2"), ("a1", "a3")]) is None  # bucket(a0+a2)'s wait before the other's copy-out
    assert lay.split(u, [("a0", "a1", "a2"), ("a3",)]) is None  # w2 in the bucket's wait, before w3
    # a boundary shift is a split, then a merge: a refused split refuses the shift (it raised TypeError)
    two = (Bucket(("a0", "a1")), Bucket(("a2", "a3")))
    h2 = materialize(g, list(two), price)
    lay2 = _Layout(g, price, two, list(h2.names))
    assert lay2.shift(lay2.unit_of["a0"], lay2.unit_of["a2"], last=True) is None  # a1 alone after a0: w1 after w0
    made = 0
    for parts in ([("a0", "a1"), ("a2", "a3")], [("a1",), ("a0",), ("a3",), ("a2",)], [("a3",), ("a0", "a1", "a2")]):
        order, new, gone = lay.split(u, parts)[:3]
        assert validate(Problem(materialize(g, new, price), None, "free"), order) == []
        made += 1
    assert made == 3


def test_under_a_budget_at_group_the_moves_refuse_what_the_budget_forbids_and_their_plan_is_used_valid():
    """A generated 6-layer FSDP step at level group, under its input order's peak: the moves shorten the plan
    (their plan is used), some moves that shorten the walk are refused, and the plan returned is valid under
    the budget at the level. Without the budget none is refused here: the budget refused them."""
    from overlapsat.cost.model import cost_model
    from overlapsat.examples import generate
    from overlapsat.solver.plan_search import optimize_plan

    model = cost_model("h200")
    g = generate("fsdp", seed=1, layers=6).reprice(model)
    problem = Problem.of(g, "1.0x", "group")
    r = optimize_plan(problem, model.duration, time_limit=2, max_evaluations=6, joint=False)
    om = r.stats["plan"]["order_moves"]
    assert om["accepted"] >= 1 and om["refused"] >= 1 and om.get("used")
    assert validate(Problem(r.bucketed, problem.budget, "group"), list(r.plan.order)) == []
    assert r.peak_memory <= problem.budget
    free = optimize_plan(Problem.of(g, "none", "group"), model.duration, time_limit=2, max_evaluations=6, joint=False)
    assert free.stats["plan"]["order_moves"]["refused"] == 0


@pytest.mark.parametrize("joint", [True, False])
def test_in_deterministic_mode_the_final_order_search_gets_the_share_the_phases_left(joint, monkeypatch):
    """The time limit is the whole call's: in deterministic mode each phase draws on one ledger of it (decision
    79), and the final `optimize` of the chosen bucketing gets FINAL_FIT of what the phases that ran left, less
    the bound's lift (0.1; at least 0.1 of the limit), the joint model charged its 0.25 where it ran; not a whole
    limit of its own (a 60-s plan took 78-92 s). Of that share's work the polish (decision 97) keeps POLISH_SHARE
    back, and its own `optimize`, where its moves paid, gets the part its moves did not; the final order's wall
    cap stays the whole share (a cap cut by a fifth left a slow machine's portfolio no time to search). The
    shares are a function of the graph alone, never the clock."""
    from overlapsat.solver import plan_search

    seen = []
    real = plan_search.optimize

    def spy(problem, params, **kw):
        if "extra_orders" in kw:  # the final order search (the bound's lift passes none)
            seen.append(params)
        return real(problem, params, **kw)

    monkeypatch.setattr(plan_search, "optimize", spy)
    r = plan_search.optimize_plan(Problem.of(_gathers(8), "none", "group"), price, time_limit=10, max_evaluations=5,
                                  joint=joint)
    final, *polished = seen
    assert len(polished) <= 1 and (not polished or r.stats["plan"]["polish"]["accepted"] > 0)  # its optimize: where moves paid
    assert ("skipped" not in r.stats["plan"]["joint"]) == joint and r.stats["plan"]["order_moves"]["tried"] > 0
    led = r.stats["plan"]["ledger"]
    assert led["by_step_s"].get("joint", 0.0) == (2.5 if joint else 0.0)
    want = max(plan_search.FINAL_SHARE_MIN * 10, 0.85 * (10 - led["spent_s"] - 0.1 * 10))
    assert led["final_s"] == pytest.approx(want)
    assert final.deterministic and final.time_limit == pytest.approx(want)
    # by hand: 0.5 work units a second (SolveParams' default), less POLISH_SHARE (0.2)
    assert final.work_limit == pytest.approx(0.8 * 0.5 * want)
    assert all(q.work_limit == pytest.approx(0.25 * 0.2 * 0.5 * want) for q in polished)  # 1 - POLISH_MOVES


def test_early_merges_are_offered_only_where_a_level_keeps_collective_sequences():
    """At free the merges put the merged collective at the later collective's place only (early ones merged a
    16k-node step into a few huge buckets); at group, where the sequence needs the earlier place, both (and at
    free under a budget, which the search passes as `early`: decision 124)."""
    from overlapsat.solver.plan_search import _sequences

    g = _with_reduce_between()
    order = ["p0", "p1", "p2", "a0", "r1", "a2", "w0", "m0", "w1", "m1", "w2", "m2"]
    pos = {nm: k for k, nm in enumerate(order)}
    free = _Layout(g, price, (), order)
    group = _Layout(g, price, (), order, _sequences(Problem.of(g, "none", "group")))
    b = Bucket(("a0", "a2"))

    def placements(lay):
        made = [e[0] for mv in _moves(lay, {}, pos) if (e := mv()) is not None and e[1] == [b]]
        return sorted(o.index(b.name) for o in made)

    assert placements(free) == [5]  # at a2's place
    assert placements(group) == [4, 5]  # at a0's place too (after the copy-in at 3)


def test_early_merges_find_what_a_tight_budget_leaves_and_are_kept_only_within_it():
    """Decision 124. Inputs made first, the three gathers waited one by one: no two transfers overlap, so no merge
    at the later collective's place exists and the default moves at free find nothing. With early merges the
    merge at the earlier gather's place (torch's) shortens the plan; under a budget it is kept only where its
    plan's peak, read by `simulate` on the bucketed graph `materialize` builds, is within it."""
    g = three_gathers()
    order = ["p0", "p1", "p2", "ag0", "w0", "m0", "ag1", "w1", "m1", "ag2", "w2", "m2"]
    before = simulate(g, order)
    assert order_preserving_search(g, price, (), order, max_moves=50, budget=10**6).accepted == 0
    r = order_preserving_search(g, price, (), order, max_moves=50, budget=10**6, early=True)
    assert r.accepted >= 1 and r.buckets and r.makespan < before.makespan
    h = materialize(g, list(r.buckets), price)
    assert validate(Problem(h, 10**6, "free"), r.order) == [] and simulate(h, r.order).makespan == r.makespan
    assert simulate(h, r.order).peak_memory > before.peak_memory  # so the unbucketed order's peak must refuse it
    tight = order_preserving_search(g, price, (), order, max_moves=50, budget=before.peak_memory, early=True)
    h2 = materialize(g, list(tight.buckets), price)
    assert tight.refused >= 1 and simulate(h2, tight.order).peak_memory <= before.peak_memory
    assert validate(Problem(h2, before.peak_memory, "free"), tight.order) == []


@pytest.mark.parametrize("budget", ["none", "1.0x"])
def test_the_plan_search_asks_for_early_merges_under_a_budget_only(budget, monkeypatch):
    """Decision 124: the plan search's bucket moves (its moves phase and its polish) merge at the earlier place
    too under a budget, and at level free without one only at the later place."""
    from overlapsat.solver import bucket_moves
    from overlapsat.solver.plan_search import optimize_plan

    asked = []
    real = bucket_moves._moves
    monkeypatch.setattr(bucket_moves, "_moves", lambda lay, stall, pos, early=None: asked.append(early) or real(
        lay, stall, pos, early))
    g = _gathers(8)  # too many bucketings to order each: the moves run (as in the test above)
    r = optimize_plan(Problem.of(g, budget, "free"), price, time_limit=3, max_evaluations=5)
    assert r.stats["plan"]["order_moves"]["tried"] > 0
    assert asked and set(asked) == ({None} if budget == "none" else {True})


def _solved_pairs(g, problem, seconds=2.0):
    """The gathers of `g` merged in pairs, ordered by `optimize`: a caller's ordered bucketing (`solved=`)."""
    from overlapsat import optimize

    names = [n.name for n in g.nodes if n.name.startswith("ag")]
    pairs = [Bucket(tuple(names[i:i + 2])) for i in range(0, len(names) - 1, 2)]
    return pairs, optimize(problem.on(materialize(problem.relaxed, pairs, price)), time_limit=seconds)


@pytest.mark.parametrize("budget", ["none", 200])  # 200 B: the pairs' order's peak (asserted)
def test_the_polish_starts_from_the_shortest_plan_the_caller_would_get_and_keeps_only_a_shorter_one(budget,
                                                                                                   monkeypatch):
    """Decision 97: after the final order, bucket moves run from the shortest of that order and the caller's
    ordered bucketings (here a pairing solved for longer than the search's share), and their plan, ordered again,
    is kept only where it is shorter than that start. Whatever it keeps is valid within the budget, and the plan is
    never longer than the caller's bucketing (as before the polish)."""
    from overlapsat.solver import plan_search

    g = _gathers(8)
    problem = Problem.of(g, budget, "free")
    pairs, solved = _solved_pairs(g, problem)
    assert solved.peak_memory == 200  # the budget of the second case binds
    starts = []
    real = plan_search.order_preserving_search

    def spy(gr, pr, buckets, order, *a, **kw):
        starts.append((tuple(buckets), list(order)))
        return real(gr, pr, buckets, order, *a, **kw)

    monkeypatch.setattr(plan_search, "order_preserving_search", spy)
    r = plan_search.optimize_plan(problem, price, time_limit=3, max_evaluations=3, joint=False,
                                  solved={"pairs": (pairs, solved)})
    polish = r.stats["plan"]["polish"]
    if budget == "none":  # measured: the pairing (126.12 us) beats the search's final order, and a move pays
        assert polish["from"] == "the caller's" and polish["used"]
    assert polish["before_us"] <= solved.makespan  # the shortest start: the caller's pairing or a shorter order
    if polish["from"] == "the caller's":
        assert starts[-1][0] == tuple(sorted(pairs, key=lambda b: g.index[b.members[0]]))
        assert polish["before_us"] == solved.makespan
    assert r.makespan <= solved.makespan + 1e-9
    if polish["used"]:
        assert r.makespan == polish["after_us"] < polish["before_us"]
    assert validate(Problem(r.bucketed, problem.budget, "free"), list(r.plan.order)) == []


def test_a_polish_that_fails_costs_nothing_but_itself(monkeypatch, caplog):
    """The polish is contained as every other phase of the plan search: where it raises, the final order stands
    and the error is logged."""
    from overlapsat.solver import plan_search

    def broken(*a, **kw):
        raise RuntimeError("polish broke")

    monkeypatch.setattr(plan_search, "order_preserving_search", broken)
    g = _gathers(8)
    r = plan_search.optimize_plan(Problem.of(g, None, "free"), price, time_limit=2, max_evaluations=3, joint=False)
    assert "polish" not in r.stats["plan"] and "the polish failed" in caplog.text
    assert validate(Problem(r.bucketed, None, "free"), list(r.plan.order)) == []
