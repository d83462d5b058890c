"""The moves of the bucket hill climb: bucketings one move away from the current one, pointed at by the current
order's stalls first; and the alternation of bucket moves that keep an order with a rescoring of the bucketing
they reach (bucket_moves.py holds the moves themselves)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from overlapsat.evaluate import Evaluated
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Pricing, bucket_key, bucket_problems, bucketable_by_key, crossing_buckets
from overlapsat.solver.bucket_moves import Confirm, MovesResult, order_preserving_search


def neighbours(g: Graph, bs: tuple[Bucket, ...],
                exposure: dict[str, float] | None = None) -> Iterator[tuple[Bucket, ...]]:
    """Bucketings one move away, each once. First the moves the current order points at (`exposure`, each
    collective's stall in it, by name of the bucketed graph): halving the buckets whose wait stalls, most stalled
    first, and merging neighbouring buckets of one key neither of which stalls. Then every legal merge of two
    buckets of one key (nearest), new bucket of two neighbouring collectives left alone, drop of a bucket, and
    split of one in two; none whose buckets depend on each other both ways. The first improving one is taken, so
    the later ones are not built."""
    pos = g.index
    seen: set[tuple[Bucket, ...]] = set()

    def with_(drop: set[int], add: list[Bucket]) -> tuple[Bucket, ...]:
        kept = [b for i, b in enumerate(bs) if i not in drop] + [b for b in add if len(b.members) >= 2]
        return tuple(sorted(kept, key=lambda b: pos[b.members[0]]))

    def merge_with_next(i: int) -> tuple[int, Bucket] | None:
        """The nearest later bucket of i's key and the two merged, if legal."""
        ka = bucket_key(g.node(bs[i].members[0]))
        for j in range(i + 1, len(bs)):
            if bucket_key(g.node(bs[j].members[0])) != ka:
                continue
            merged = Bucket(tuple(sorted(bs[i].members + bs[j].members, key=pos.__getitem__)))
            return (j, merged) if not bucket_problems(g, [merged]) else None
        return None

    def moves() -> Iterator[tuple[Bucket, ...]]:
        if exposure:
            stalled = sorted((i for i, b in enumerate(bs) if exposure.get(b.name, 0.0) > 0.0),
                             key=lambda i: (-exposure[bs[i].name], i))
            for i in stalled:
                half = len(bs[i].members) // 2
                yield with_({i}, [Bucket(bs[i].members[:half]), Bucket(bs[i].members[half:])])
            for i, a in enumerate(bs):
                if exposure.get(a.name, 0.0) == 0.0:
                    m = merge_with_next(i)
                    if m is not None and exposure.get(bs[m[0]].name, 0.0) == 0.0:
                        yield with_({i, m[0]}, [m[1]])
        for i in range(len(bs)):  # merges of two buckets with one key, nearest first: fewer latencies
            m = merge_with_next(i)
            if m is not None:
                yield with_({i, m[0]}, [m[1]])
        for a, b in free_pairs(g, bs):  # two collectives left alone, nearest of one key: a new bucket
            yield with_(set(), [Bucket((a, b))])
        for i in range(len(bs)):  # drops: the members go back to their own transfers
            yield with_({i}, [])
        for i, b in enumerate(bs):  # splits in halves, then at every other point
            half = len(b.members) // 2
            for k in [half] + [k for k in range(1, len(b.members)) if k != half]:
                yield with_({i}, [Bucket(b.members[:k]), Bucket(b.members[k:])])

    for cand in moves():
        if cand not in seen and cand != bs:
            seen.add(cand)
            if len(cand) >= 2 and crossing_buckets(g, cand):  # a merge can make two buckets depend both ways
                continue
            yield cand


def free_pairs(g: Graph, bs: tuple[Bucket, ...]) -> Iterator[tuple[str, str]]:
    """Each collective in no bucket with the next one of its key also in none, where the two may share a bucket."""
    taken = {m for b in bs for m in b.members}
    for cs in bucketable_by_key(g).values():
        free = [g.names[c] for c in cs if g.names[c] not in taken]
        for a, b in zip(free, free[1:]):
            if not bucket_problems(g, [Bucket((a, b))]):
                yield a, b


def alternate(g: Graph, price: Pricing, bs: tuple[Bucket, ...], order: list[str], max_moves: int,
               late: Callable[[], bool], score: Callable[[tuple[Bucket, ...]], Evaluated | None],
               confirm: Confirm | None = None, sequences: list[list[int]] | None = None,
               rounds: int = 10, budget: int | None = None, early: bool | None = None) -> MovesResult:
    """Bucket moves that keep the order, then the few scoring passes on the bucketing they reach (whose order may
    be better than the edited one), then moves again from the better order, while a round improves."""
    t0 = time.monotonic()
    tried = accepted = refused = 0
    first: float | None = None
    out = MovesResult(bs, order, math.inf, 0, 0, None)
    for _ in range(rounds):
        started = time.monotonic() - t0
        r = order_preserving_search(g, price, bs, order, max(0, max_moves - tried), late, confirm, sequences,
                                   budget, early)
        tried, accepted, refused = tried + r.tried, accepted + r.accepted, refused + r.refused
        if r.first_s is not None and first is None:
            first = started + r.first_s
        out = MovesResult(r.buckets, r.order, r.makespan, tried, accepted, first, refused)
        if not r.accepted or tried >= max_moves or late():
            break
        e = score(r.buckets)
        if e is None or e.makespan >= r.makespan - 1e-9 * max(1.0, r.makespan):
            break
        bs, order = r.buckets, [e.sim.graph.names[v] for v in e.order]
    return out


__all__ = ["alternate", "free_pairs", "neighbours"]
