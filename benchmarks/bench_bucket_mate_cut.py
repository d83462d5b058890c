"""A prototype, not the library's: the relaxation over every bucketing ordered at level free, plus a cut that knows
bucket-mates at level group (benchmarks/results/bench_energetic_2026-12-03.md).

    python benchmarks/bench_bucket_mate_cut.py [--work 10]

At level group a bucket takes its first member's place in the collective sequence, so a collective b issued before
an earlier one a (b passes a) shares a bucket with some c before a, and c's waits end after b's transfer (the
bucket's members wait together). Each pair (a, b) of one group gets: b passes a => some partner c of b before a
(same key, independent, within the cap, not kept apart) has every wait ending after b's transfer. The whole model
of the relaxation is solved with it (monkeypatched in; no incumbent, a safe horizon: the library's heuristic
orders need not meet the cut) and without it, under the input order's peak and with no budget.
"""
import argparse
import time

from overlapsat import Problem, SolveParams, load_graph, optimize
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.plan import bucketable_by_key
from overlapsat.solver import model as M
from overlapsat.solver import search as S
from overlapsat.solver.memory_bound import kept_apart
from overlapsat.solver.plan_bound import analytical_over_bucketings

CUT = {}

def partners(g, cap, apart):
    n = len(g.nodes)
    # reachability bitsets over all nodes (small graphs)
    desc = [0] * n
    for v in range(n - 1, -1, -1):
        acc = 1 << v
        for s in g.succs[v]:
            acc |= desc[s]
        desc[v] = acc
    out = {}
    for cs in bucketable_by_key(g).values():
        for b in cs:
            for c in cs:
                if c == b or desc[c] >> b & 1 or desc[b] >> c & 1:
                    continue
                if apart is not None and apart.shut and apart.pair(b, c):
                    continue
                if cap is not None and g.nodes[b].nbytes + g.nodes[c].nbytes > cap:
                    continue
                out.setdefault(b, set()).add(c)
    return out

real = M.Model.add_collective_streams
def patched(self):
    real(self)
    if not CUT or not self.whole:
        return
    g, m = self.g, self.m
    # the search runs on the canonical form (decision 58): its node ids are not the caller's, so the partners
    # are read off the model's own graph
    P = partners(g, CUT["cap"], kept_apart(g, CUT["budget"]) if CUT["budget"] is not None else None)
    for cs in g.group_colls:
        for j, b in enumerate(cs):
            z_prev = None  # z before cs[0]: false
            for i in range(j):
                a = cs[i]
                # z_i: b shares a bucket with some c among cs[0..i-1]
                if i == 0:
                    z = None
                else:
                    c = cs[i - 1]
                    terms = []
                    if z_prev is not None:
                        terms.append(z_prev)
                    if c in P.get(b, ()):
                        y = m.new_bool_var("")
                        m.add_hint(y, False)
                        for w in g.waits_of[c]:
                            m.add(self.wait_end[w] >= self.comm_start[b] + self.comm_len[b]).only_enforce_if(y)
                        terms.append(y)
                    if terms:
                        z = m.new_bool_var("")
                        m.add_bool_or(terms).only_enforce_if(z)
                        m.add_hint(z, False)
                    else:
                        z = None
                z_prev = z
                if z is None:
                    m.add(self.issue[b] >= self.issue[a] + 1)
                else:
                    # b passes a => z
                    m.add(self.issue[b] >= self.issue[a] + 1).only_enforce_if(~z)
M.Model.add_collective_streams = patched

_sw = S.solve_whole
def _sw2(problem, ts, params, tb, incumbent, *a, **k):
    return _sw(problem, ts, params, tb, None if CUT else incumbent, *a, **k)
S.solve_whole = _sw2

def run(name, work, use_budget, cut):
    price = cost_model("h200")
    g = load_graph(bundled(name)).reprice(price)
    pb = Problem.of(g).with_default_budget()
    budget = pb.budget if use_budget else None
    rg = analytical_over_bucketings(pb if use_budget else Problem.of(g), price.duration)[0]
    CUT.clear()
    if cut:
        CUT.update(cap=pb.bucket_cap, budget=budget)
    t = time.monotonic()
    r = optimize(Problem(rg, budget, "free"), SolveParams(time_limit=900, work_limit=work, collective_order="free"))
    ph = r.stats.phases
    print(f"| {name} | {'input order' if use_budget else 'none'} | {'yes' if cut else 'no'} | {r.bound:,.1f} | "
          f"{ph.get('solver_status', '-')} | {ph.get('deterministic_s') or 0:.2f} | {time.monotonic() - t:.1f} |",
          flush=True)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=float, default=10.0)
    a = ap.parse_args()
    print(f"{a.work:g} reference seconds of work per solve, deterministic, h200 prices.")
    for name in ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large"):
        for ub in (True, False):
            for cut in (False, True):
                run(name, a.work, ub, cut)
