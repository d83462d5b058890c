"""Pausing Python's cyclic garbage collector while overlapsat builds large tables or searches.

Building a graph's index or running the heuristic portfolio allocates millions of small lists and tuples;
each 700 of them start a collection, and the older generations' passes walk every object already built.
At 100k nodes that was about half of graph loading and a quarter of the portfolio (docs/solver.md). What is
built there stays alive until the block ends, so those collections found almost nothing to reclaim; the
collector is paused for the duration (cyclic garbage left meanwhile is collected after it) and restored as
it was found (a caller that disabled it keeps it disabled). Reference counting still frees
everything as usual; only cycle detection waits. The switch is process-wide: with blocks in several threads,
each that found the collector on turns it back on as it leaves, so it is on again once all have left (maybe
earlier, which costs only speed).

`optimize` and `optimize_plan` run paused as a whole (decision 101): a 10-s plan search at 7.9k nodes spent 2.3 s
of its 10 in collections, 1.9 s of it in eleven full ones that walked every graph alive. A search therefore
leaves no reference cycles (tests/solver/test_overhead.py): a graph's caches never hold the graph, a canonical
problem says so by a flag, and CP-SAT models are built without the aliases ortools binds to each one.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with the cyclic collector off; re-enable it afterwards only if it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
