"""The space of bucketings a plan search walks: torch's greedy buckets made legal (the warm starts), a peer's
buckets in this graph's terms, and every legal bucketing of a small space (MODEL.md "Buckets")."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from overlapsat.graph import Graph
from overlapsat.heuristics.bucketing import greedy_buckets
from overlapsat.plan import Bucket, bucket_problems, bucketable_by_key, crossing_buckets
from overlapsat.problem import Problem

MIB = 1024 * 1024
MAX_KEY_ENUMERATED = 64  # collectives of one key beyond which bucketings are not listed (recursion depth, time)


def torch_greedy(problem: Problem, g: Graph, cap_mb: float) -> tuple[Bucket, ...]:
    """torch's greedy buckets of `g` (in its node order) at `cap_mb`, cut to legal runs within the bucket policy."""
    return acyclic(g, within_cap(problem, legal(g, tuple(greedy_buckets(g, int(cap_mb * MIB))))))


def within_cap(problem: Problem, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs` with each bucket above the problem's bucket cap cut, in member order, into the longest runs within
    it (torch's greedy bucketer closes a bucket only once it reaches its cap, so one may pass it); a run of one
    is no bucket. Parts of a bucket stay legal and acyclic: a cycle through them would be one through the whole."""
    if problem.bucket_cap is None:
        return bs
    out: list[Bucket] = []
    for b in bs:
        if not problem.over_cap([b]):
            out.append(b)
            continue
        run: list[str] = []
        size = 0
        for m in b.members:
            nb = int(problem.graph.node(m).nbytes)
            if run and size + nb > problem.bucket_cap:
                if len(run) > 1:
                    out.append(Bucket(tuple(run)))
                run, size = [], 0
            run.append(m)
            size += nb
        if len(run) > 1 and size <= problem.bucket_cap:
            out.append(Bucket(tuple(run)))
    return tuple(out)


def legal(g: Graph, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs` with each bucket that breaks MODEL.md's legality rules cut, in member order, into the longest legal
    runs (torch's greedy bucketer does not check every rule overlapsat's model has, such as a member depending on
    another); a run of one is no bucket."""
    out: list[Bucket] = []
    for b in bs:
        if not bucket_problems(g, [b]):
            out.append(b)
            continue
        run: list[str] = []
        for m in b.members:
            if run and bucket_problems(g, [Bucket((*run, m))]):
                if len(run) > 1:
                    out.append(Bucket(tuple(run)))
                run = []
            run.append(m)
        if len(run) > 1:
            out.append(Bucket(tuple(run)))
    return tuple(out)


def acyclic(g: Graph, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs`, or where its buckets depend on each other both ways (keys bucketed apart can), those of them kept in
    order that do not close a cycle with the ones kept before."""
    if len(bs) < 2 or not crossing_buckets(g, bs):
        return bs
    kept: list[Bucket] = []
    for b in bs:
        if not crossing_buckets(g, [*kept, b]):
            kept.append(b)
    return tuple(kept)


def as_buckets(g: Graph, given: Sequence[Bucket | Sequence[str]]) -> tuple[Bucket, ...]:
    """A peer's buckets (members by name, in any order: torch lists them in its merge order) as this graph's:
    each bucket's members in their group's input order, buckets by their first member."""
    def pos(nm: str) -> int:
        return g.index.get(nm, len(g.nodes))

    bs = [Bucket(tuple(sorted(b.members if isinstance(b, Bucket) else tuple(b), key=pos))) for b in given]
    return tuple(sorted(bs, key=lambda b: pos(b.members[0]) if b.members else -1))


def all_bucketings(g: Graph, limit: int) -> list[tuple[Bucket, ...]] | None:
    """Every legal bucketing of `g` (MODEL.md "Buckets"), or None when there are more than `limit` (or a key has
    more than `MAX_KEY_ENUMERATED` collectives): per bucket key, every partition of its collectives into legal
    buckets and collectives left alone."""
    options: list[list[list[Bucket]]] = []
    total = 1
    for cs in bucketable_by_key(g).values():
        if len(cs) > MAX_KEY_ENUMERATED:  # not listed (it may still have few legal bucketings): searched instead
            return None
        found: list[list[Bucket]] = []
        if not partitions(g, [g.names[c] for c in cs], [], found, limit):
            return None
        options.append(found)
        total *= len(found)
        if total > limit:
            return None
    if total > limit:
        return None
    out = [tuple(sorted((b for part in combo for b in part), key=lambda b: g.index[b.members[0]]))
           for combo in itertools.product(*options)]
    # buckets legal alone may still depend on each other both ways (MODEL.md rule 2): such a set is no bucketing
    return sorted((bs for bs in out if len(bs) < 2 or not crossing_buckets(g, bs)), key=len)


def partitions(g: Graph, rest: list[str], blocks: list[list[str]], out: list[list[Bucket]], limit: int) -> bool:
    """Extend `blocks` by every placement of `rest` (each collective joins an earlier block or opens one);
    append each legal partition's buckets to `out`. False once `out` passes `limit`."""
    if not rest:
        out.append([Bucket(tuple(b)) for b in blocks if len(b) >= 2])
        return len(out) <= limit
    head, tail = rest[0], rest[1:]
    for b in blocks:
        b.append(head)
        ok = not bucket_problems(g, [Bucket(tuple(b))])
        if ok and not partitions(g, tail, blocks, out, limit):
            b.pop()
            return False
        b.pop()
    blocks.append([head])
    more = partitions(g, tail, blocks, out, limit)
    blocks.pop()
    return more


__all__ = ["MAX_KEY_ENUMERATED", "acyclic", "all_bucketings", "as_buckets", "legal", "torch_greedy", "within_cap"]
