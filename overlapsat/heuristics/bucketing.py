"""torch's greedy bucketer (`fx_passes/bucketing.py`, `greedy_bucket_collective_by_mb`) on the graph model.

It decides buckets only; `plan.materialize` applies them. torch's rule, per
operation (all_gather and reduce_scatter are bucketed by separate passes):
walk the waits in input order; collectives whose waits follow one another
among that operation's waits, with one bucket key, form a run; cut each run
into buckets of at most `cap_bytes` (a collective's size is the larger of its
input and output, the graph's `nbytes`), skipping (leaving unbucketed) a
collective that depends on a member of the bucket being filled. A bucket of
one is no bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

from overlapsat.graph import WAIT, Graph
from overlapsat.plan import Bucket, bucket_key, member_problems

TORCH_CAP_BYTES = 2000 * 1024 * 1024  # torch's `bucket_cap_mb_by_bucket_idx_default`: 2000 MB per bucket
TORCH_OPS = ("all_gather", "reduce_scatter")  # the operations torch's FSDP bucketing passes merge


def greedy_buckets(g: Graph, cap_bytes: int = TORCH_CAP_BYTES, ops: Sequence[str] = TORCH_OPS) -> list[Bucket]:
    """torch's greedy buckets by size, for each operation in `ops`, in torch's order (one operation at a time)."""
    out: list[Bucket] = []
    for op in ops:
        runs: list[list[int]] = []
        run: list[int] = []
        key = None
        for v in range(len(g.nodes)):
            if g.kind[v] != WAIT:
                continue
            c = g.coll_of[v]
            if g.nodes[c].op != op or g.wait_of[c] != v or member_problems(g, c):
                continue
            k = bucket_key(g.nodes[c])
            if k == key:
                run.append(c)
            else:
                if len(run) > 1:
                    runs.append(run)
                run, key = [c], k
        if len(run) > 1:
            runs.append(run)
        for run in runs:
            out += _cut(g, run, cap_bytes)
    return out


def _cut(g: Graph, run: list[int], cap_bytes: int) -> list[Bucket]:
    """`run` cut into buckets of at most `cap_bytes` (closed once the next member would pass it), skipping a member
    that depends on one already in the bucket (merging it would make a cycle)."""
    below = _descendants_in(g, run)
    buckets: list[Bucket] = []
    cur: list[int] = []
    reach = 0  # the run's members below the bucket being filled, as bits
    size = 0
    for k, c in enumerate(run):
        if reach >> k & 1:  # it depends on a member: merging would make a cycle
            continue
        nbytes = g.nodes[c].nbytes
        if cur and size + nbytes > cap_bytes:
            if len(cur) > 1:
                buckets.append(_bucket(g, cur))
            cur, reach, size = [], 0, 0
        cur.append(c)
        size += nbytes
        reach |= below[k]
    if len(cur) > 1:
        buckets.append(_bucket(g, cur))
    return buckets


def _descendants_in(g: Graph, run: list[int]) -> list[int]:
    """For each member of `run`, the other members it reaches, as bits by position in `run`: one sweep backwards
    over the graph's order (a topological order), up to the run's last member."""
    bit = {c: 1 << k for k, c in enumerate(run)}
    last = max(run)
    reach = [0] * (last + 1)
    for v in range(last, -1, -1):
        r = bit.get(v, 0)
        for s in g.succs[v]:
            if s <= last:
                r |= reach[s]
        reach[v] = r
    return [reach[c] & ~bit[c] for c in run]


def _bucket(g: Graph, members: list[int]) -> Bucket:
    """Members named in their group's input order (the order torch found them in is their waits')."""
    return Bucket(tuple(g.names[c] for c in sorted(members)))


__all__ = ["TORCH_CAP_BYTES", "TORCH_OPS", "greedy_buckets"]
