"""Ground truth for the soundness properties: a random graph generator and brute force.

Written from MODEL.md alone. It shares no code with the solver, the
heuristics or the library's generators (which the solver is tuned on), and
carries its own simulator, so a property that compares the two can fail.
Used by tests/test_soundness.py (a fixed seeded sample) and tests/soak.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from overlapsat import Buffer, Graph, Node, NodeKind

DURATIONS = [0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 5.0, 8.0, 0.5, 2.25]
ODD_DURATIONS = [1 / 3, 2 / 7, 1.000001, 7.123456789]  # not whole at any resolution: rounding must stay sound


def random_graph(seed: int, max_nodes: int = 9) -> tuple[Graph, str]:
    """A random graph in input order and the collective order it should be solved with."""
    rng = random.Random(seed)
    odd = rng.random() < 0.15
    durs = DURATIONS + (ODD_DURATIONS if odd else [])
    n_groups = rng.choice([1, 1, 2, 2, 3])
    nodes: list[Node] = []
    pending: list[str] = []  # collectives whose wait is still to come
    produced: list[str] = []  # buffers readable now
    bufs: dict[str, dict] = {}
    target = rng.randint(3, max_nodes)
    k = 0
    if rng.random() < 0.4:
        name = "in0"
        bufs[name] = dict(producer=None, cons=[], a=0, f=rng.randint(1, 30), out=rng.random() < 0.1, fin=True)
        produced.append(name)

    def read_some(node: str) -> None:
        for b in produced:
            if rng.random() < 0.3 and node not in bufs[b]["cons"]:
                bufs[b]["cons"].append(node)

    while len(nodes) < target:
        room = target - len(nodes)
        if pending and (rng.random() < 0.4 or room <= len(pending)):
            entry = pending.pop(rng.randrange(len(pending)))
            if rng.random() < 0.12:  # a collective never waited in this graph
                continue
            c, _, part = entry.partition("#")  # "c3#1": the second wait of a coalesced collective
            w = f"{c}_w{part}"
            nodes.append(Node(w, NodeKind.WAIT, 0.0, collective=c))
            out = f"{c}_out{part}"
            if out in bufs:
                bufs[out]["cons"].append(w)
                produced.append(out)
            continue
        if room >= 2 and rng.random() < 0.3:
            c = f"c{k}"
            k += 1
            nodes.append(Node(c, NodeKind.COLLECTIVE, rng.choice(durs), group=f"g{rng.randrange(n_groups)}",
                              op="all_gather", nbytes=0, group_size=2))
            read_some(c)
            if rng.random() < 0.8:
                size = rng.randint(0, 30)
                bufs[f"{c}_out"] = dict(producer=c, cons=[], a=size, f=size, out=False, fin=False)
            pending.append(c)
            if room >= 3 and rng.random() < 0.25:  # coalesced: one transfer, a wait (and an output) per tensor
                size = rng.randint(0, 30)
                bufs[f"{c}_out1"] = dict(producer=c, cons=[], a=size, f=size, out=False, fin=False)
                pending.append(f"{c}#1")
            continue
        v = f"k{k}"
        k += 1
        nodes.append(Node(v, NodeKind.COMPUTE, rng.choice(durs)))
        read_some(v)
        r = rng.random()
        if r < 0.2:  # Inductor's multi-output kernel: the parent allocates, the children free
            sizes = [rng.randint(1, 20) for _ in range(rng.randint(2, 3))]
            bufs[f"{v}_p"] = dict(producer=v, cons=[], a=sum(sizes), f=0, out=False, fin=False)
            for i, s in enumerate(sizes):
                bufs[f"{v}_o{i}"] = dict(producer=v, cons=[], a=0, f=s, out=rng.random() < 0.1, fin=False)
                produced.append(f"{v}_o{i}")
        elif r < 0.3:  # an arbitrary alloc/free split
            bufs[f"{v}_x"] = dict(producer=v, cons=[], a=rng.randint(0, 30), f=rng.randint(0, 30),
                                  out=rng.random() < 0.2, fin=False)
            produced.append(f"{v}_x")
        elif r < 0.9:
            s = rng.randint(0, 30)
            bufs[f"{v}_b"] = dict(producer=v, cons=[], a=s, f=s, out=rng.random() < 0.15, fin=False)
            produced.append(f"{v}_b")
    for entry in pending:
        if rng.random() < 0.7:
            c, _, part = entry.partition("#")
            nodes.append(Node(f"{c}_w{part}", NodeKind.WAIT, 0.0, collective=c))
            if f"{c}_out{part}" in bufs:
                bufs[f"{c}_out{part}"]["cons"].append(f"{c}_w{part}")
    buffers = [Buffer(nm, d["producer"], tuple(d["cons"]), d["a"], d["f"], d["out"], d["fin"]) for nm, d in bufs.items()]
    names = [nd.name for nd in nodes]
    edges = []
    for _ in range(rng.randint(0, 2)):
        i, j = sorted(rng.sample(range(len(names)), 2))
        edges.append((names[i], names[j]))
    colls = [nd.name for nd in nodes if nd.kind is NodeKind.COLLECTIVE]
    collective_order = rng.choice(["group", "group", "global", "chain", "free", "free"])
    fake = []
    if collective_order in ("global", "chain") and rng.random() < 0.7:  # Inductor's global chain as fake edges
        fake = list(zip(colls, colls[1:]))
    if rng.random() < 0.4:  # ... and as captured graphs carry it: the wait of each collective before the next
        step = {nm: k for k, nm in enumerate(names)}
        waits = {nd.collective: nd.name for nd in nodes if nd.kind is NodeKind.WAIT}
        fake += [(waits[a], b) for a, b in zip(colls, colls[1:]) if a in waits and step[waits[a]] < step[b]]
    atomic = []
    if rng.random() < 0.25:
        pairs = [(a.name, b.name) for a, b in zip(nodes, nodes[1:])
                 if a.kind is NodeKind.COMPUTE and b.kind is NodeKind.COMPUTE]
        if pairs:
            atomic = [rng.choice(pairs)]
    costs = random.Random(seed * 7919 + 1)  # its own stream: the graphs above stay what they were
    if costs.random() < 0.35:  # waits and launches that cost the compute stream time (decisions.md 17)
        extra = [0.0, 0.0, 0.5, 1.0, 2.0, 3.0] + (ODD_DURATIONS if odd else [])
        nodes = [replace(nd, launch=costs.choice(extra)) if nd.kind is NodeKind.COLLECTIVE
                 else replace(nd, duration=costs.choice(extra)) if nd.kind is NodeKind.WAIT else nd for nd in nodes]
    return Graph(tuple(nodes), tuple(buffers), tuple(edges), tuple(atomic), f"soak{seed}",
                 fake_edges=tuple(fake)), collective_order


@dataclass
class Truth:
    """Brute force over every valid order (ignoring memory), with each one's makespan and peak."""

    orders: list[tuple[list[int], float, int]]

    def best(self, budget: int | None) -> float | None:
        ok = [ms for _, ms, pk in self.orders if budget is None or pk <= budget]
        return min(ok) if ok else None

    @property
    def min_peak(self) -> int:
        return min(pk for _, _, pk in self.orders)


def sim(g: Graph, order: list[int]) -> tuple[float, int]:
    """MODEL.md's walk, written out again here (with decisions.md 17's launch and wait costs): (makespan, peak)."""
    t, free, end = 0.0, {}, {}
    for v in order:
        nd = g.nodes[v]
        if nd.kind is NodeKind.COMPUTE:
            t += nd.duration
        elif nd.kind is NodeKind.COLLECTIVE:
            t += nd.launch  # issuing it costs the compute stream first
            s = max(t, free.get(nd.group, 0.0))
            end[nd.name] = free[nd.group] = s + nd.duration
        else:
            t = max(t, end[nd.collective]) + nd.duration  # the wait's own time, once the transfer is over
    makespan = max([t, *free.values()])
    step = {g.nodes[v].name: i for i, v in enumerate(order)}
    alloc = [0] * len(order)
    freed = [0] * len(order)
    for b in g.buffers:
        if b.producer is None and not b.freeable_input:
            continue
        at = step[b.producer] if b.producer is not None else 0
        alloc[at] += b.size_alloc if b.producer is not None else b.size_free
        if b.output:
            continue
        last = max((step[c] for c in set(b.consumers)), default=at)
        freed[last] += b.size_free
    cur, peak = 0, 0
    for i in range(len(order)):
        cur += alloc[i]
        peak = max(peak, cur)
        cur -= freed[i]
    return makespan, peak


def _preds(g: Graph, collective_order: str) -> list[list[int]]:
    """Dependencies from MODEL.md: data (producer before consumers; a collective's output read after its
    wait), collective before its wait, explicit edges, and fake/implied edges, except those that are
    Inductor's collective chain (collective i, or its wait, before collective i + 1) below the "chain" level."""
    n = len(g.nodes)
    idx = {nd.name: i for i, nd in enumerate(g.nodes)}
    pre: list[set[int]] = [set() for _ in range(n)]
    waits: dict[str, list[int]] = {}  # a collective may have several waits (docs/decisions.md 15)
    for i, nd in enumerate(g.nodes):
        if nd.kind is NodeKind.WAIT:
            waits.setdefault(nd.collective, []).append(i)
            pre[i].add(idx[nd.collective])
    for b in g.buffers:
        if b.producer is None:
            continue
        p = idx[b.producer]
        mine = waits.get(b.producer, [])
        # a reader of a collective's output follows the waits that read it (all of them if none does)
        sink = [w for w in mine if g.names[w] in b.consumers] or mine
        for c in b.consumers:
            if idx[c] != p:
                pre[idx[c]].add(p)
                if g.nodes[p].kind is NodeKind.COLLECTIVE and idx[c] not in mine:
                    pre[idx[c]].update(sink)
    for u, v in g.edges:
        pre[idx[v]].add(idx[u])
    colls = [nd.name for nd in g.nodes if nd.kind is NodeKind.COLLECTIVE]
    chain = set(zip(colls, colls[1:])) | {(g.names[w], b) for a, b in zip(colls, colls[1:]) for w in waits.get(a, [])}
    for u, v in g.fake_edges + g.implied_edges:
        if collective_order == "chain" or (u, v) not in chain or (u, v) in set(g.edges):
            pre[idx[v]].add(idx[u])
    return [sorted(p) for p in pre]


def brute_force(g: Graph, collective_order: str, limit: int = 200_000) -> Truth | None:
    """Every valid order (dependencies, collective order, atomic groups); None if too many or none.

    Collective order, from the policy's definition: "group" keeps each group's
    input order, "global" and "chain" the input order of all collectives, and
    "chain" also issues the wait of each collective before the next one; "free"
    adds nothing.
    """
    n = len(g.nodes)
    preds = _preds(g, collective_order)
    colls = [v for v in range(n) if g.nodes[v].kind is NodeKind.COLLECTIVE]
    seqs: list[list[int]] = []
    if collective_order == "group":
        for grp in sorted({g.nodes[c].group for c in colls}):
            seqs.append([c for c in colls if g.nodes[c].group == grp])
    elif collective_order in ("global", "chain"):
        seqs.append(colls)
    for seq in seqs:
        for a, b in zip(seq, seq[1:]):
            preds[b].append(a)
            if collective_order == "chain":
                preds[b] += [w for w in range(n) if g.nodes[w].kind is NodeKind.WAIT and g.nodes[w].collective == g.names[a]]
    prev: dict[int, int] = {}
    atomic_next = {}
    for grp in g.atomic:
        for a, b in zip(grp, grp[1:]):
            atomic_next[a] = b
    in_atomic_tail = {b for grp in g.atomic for b in grp[1:]}
    out: list[tuple[list[int], float, int]] = []
    placed = [False] * n
    order: list[int] = []

    def ok(v: int) -> bool:
        return not placed[v] and all(placed[u] for u in preds[v]) and (v not in prev or placed[prev[v]])

    def rec(forced: int | None) -> bool:
        if len(out) > limit:
            return False
        if len(order) == n:
            ms, pk = sim(g, order)
            out.append((list(order), ms, pk))
            return True
        cands = [forced] if forced is not None else [v for v in range(n) if v not in in_atomic_tail]
        for v in cands:
            if ok(v):
                placed[v] = True
                order.append(v)
                if not rec(atomic_next.get(v)):
                    return False
                order.pop()
                placed[v] = False
        return True

    if not rec(None):
        return None
    return Truth(out)  # empty: no order satisfies the policy ("chain" against the dependencies)


FAILURES = ("false_bound", "false_optimal", "false_infeasible", "invalid_result", "worse_than_heuristic",
            "status_gap_mismatch", "sim_mismatch", "crash", "abort")


def edge_graph(seed: int, max_nodes: int = 9) -> tuple[Graph, str]:
    """`random_graph` moved to the edges of the input space (issue "certificates at the edges"): sizes times
    2^k up to about 2^50 B, durations times 10^e from 1e-6 to 1e7 us, uniformly or mixed per node (thirds
    included: 1/3 times a power of ten), and buffers that free more than they allocate."""
    g, co = random_graph(seed, max_nodes)
    rng = random.Random(seed * 104729 + 7)
    k = rng.choice([0, 20, 30, 40, 45])
    mixed = rng.random() < 0.5
    e0 = rng.randint(-6, 6)

    def dur(d: float) -> float:
        if not d:
            return d
        e = rng.randint(-6, 6) if mixed else e0
        base = d if rng.random() < 0.8 else 1 / 3
        return min(1e7, base * 10.0 ** e)

    nodes = tuple(replace(nd, duration=dur(nd.duration) if nd.kind is not NodeKind.WAIT or nd.duration else 0.0,
                          launch=dur(nd.launch)) for nd in g.nodes)
    bufs = []
    for b in g.buffers:
        a, f = b.size_alloc << k, b.size_free << k
        if b.producer is not None and rng.random() < 0.15:
            f = a + (rng.randint(1, 30) << k)  # frees more than it allocates (a view's base, Inductor's accounting)
        bufs.append(replace(b, size_alloc=a, size_free=f))
    return replace(g, nodes=nodes, buffers=tuple(bufs), name=f"edge{seed}"), co


def check(seed: int, time_limit: float, interference: bool = False, edges: bool = False) -> dict:
    """One graph: returns counters (failures, outcomes) and details of any failure. `interference`: solve with
    the contention tie-break on (docs/solver.md), whose result must meet every same claim."""
    import overlapsat as osat
    from overlapsat.bounds import lower_bound
    from overlapsat.cost import H200_STEP

    extra = {"interference": H200_STEP} if interference else {}

    g, co = edge_graph(seed) if edges else random_graph(seed)
    truth = brute_force(g, co)
    out: dict = {"seed": seed, "nodes": len(g.nodes), "counts": {}, "failures": []}

    def count(k: str, detail: str = "") -> None:
        out["counts"][k] = out["counts"].get(k, 0) + 1
        if k in FAILURES:
            out["failures"].append(f"{k}: {detail}")

    if truth is None:
        count("skipped_too_many_orders")
        return out
    if not truth.orders:  # the policy admits no order: a clear error, never a schedule or a budget claim
        try:
            osat.optimize(g, time_limit=time_limit, collective_order=co, workers=2)
            count("invalid_result", f"an order returned though none satisfies collective_order={co!r}")
        except osat.InfeasibleBudgetError:
            count("false_infeasible", "budget blamed for an unsatisfiable collective order")
        except osat.GraphError:
            count("policy_unsatisfiable_reported")
        except Exception as e:  # noqa: BLE001 - counted, with its message
            count("crash", f"{type(e).__name__}: {e}")
        return out
    opt_free = truth.best(None)
    for name, v in lower_bound(g, co).as_dict().items():
        if name != "exposed" and v > opt_free + 1e-12 * max(1.0, opt_free):
            count("false_bound", f"{name} {v} > optimum {opt_free}")
    rng = random.Random(seed)
    peaks = sorted({pk for _, _, pk in truth.orders})
    budget = rng.choice([None, truth.min_peak - 1, truth.min_peak, rng.choice(peaks)])
    if budget is not None and budget < 0:
        budget = None
    best = truth.best(budget)
    try:
        r = osat.optimize(g, time_limit=time_limit, memory_budget=budget, collective_order=co, workers=2, **extra)
    except osat.InfeasibleBudgetError:
        count("infeasible_claimed")
        if best is not None:
            count("false_infeasible", f"budget {budget}, optimum {best}")
        return out
    except osat.NoValidOrderError:
        count("no_valid_order_in_time" + ("_feasible" if best is not None else "_infeasible"))
        return out
    except Exception as e:  # noqa: BLE001 - counted, with its message
        count("crash", f"{type(e).__name__}: {e}")
        return out
    ms, pk = sim(g, r.order)
    lib = osat.simulate(g, r.order)
    if abs(lib.makespan - ms) > 1e-9 * max(1.0, ms) or lib.peak_memory != pk:
        count("sim_mismatch", f"library {lib.makespan}/{lib.peak_memory}, brute {ms}/{pk}")
    if best is None or (budget is not None and pk > budget) or osat.validate(g, r.order, budget, collective_order=co):
        count("invalid_result", f"budget {budget}, peak {pk}")
        return out
    if r.bound > best + 1e-12 * max(1.0, best):
        count("false_bound", f"result bound {r.bound} > optimum {best}")
    if r.status.value in ("optimal", "heuristic_optimal") and ms > best + 1e-9 * max(1.0, best):
        count("false_optimal", f"{r.status.value} at {ms}, optimum {best}")
    hv = [h["makespan"] for h in r.heuristics if h["valid"]]
    if hv and ms > min(hv) + 1e-9:
        count("worse_than_heuristic", f"{ms} > {min(hv)}")
    if (r.gap == 0.0) != r.proven or (r.status.value in ("optimal", "heuristic_optimal")) != r.proven:
        count("status_gap_mismatch", f"{r.status.value} gap {r.gap}")
    count("status_" + r.status.value)
    if r.stats.get("contention_polish", {}).get("moves"):
        count("tie_broken")
    if abs(ms - best) <= 1e-9 * max(1.0, best):
        count("result_is_optimum")
    return out
