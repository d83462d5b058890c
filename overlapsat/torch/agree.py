"""Cross-rank agreement on the collective sequence, for `collective_order="free"` inside torch.compile.

Under "group" and "chain", every order a rank may apply issues each group's
collectives in the captured order, so a rank that falls back to Inductor's
order alone stays in step with the others. Under "free" it would not: one
rank without the schedule (a missing file, a fault, a refused validation)
would issue its collectives in another order than its peers, and NCCL would
hang. So the FX pass applies a free order only after every rank has said it
is about to issue the same collective sequence (docs/decisions.md 19):

1. each rank moves its graph to its order, or keeps the graph as it came,
   and hashes the names of the collectives in the resulting node order;
2. it writes the hash under its rank in the default process group's store
   and waits for every rank's hash (one exchange per compiled graph, keyed
   by a per-process count of exchanges, so keys are never reused);
3. if every hash is equal, the order stands; if any differs, or the
   exchange fails, the rank puts its graph back as it came.

Why no rank can end up alone: step 3 decides on the same set of hashes on
every rank, so all keep or all restore, and a restored graph issues the
captured sequence, which is the same on every rank of an SPMD program. The
cases left are those torch's own compile-time exchanges (spmd_check, the
estimate alignment) share: ranks that do not compile the same graphs in the
same sequence (then hashes differ, or the wait times out and that rank
restores), and a rank whose wait times out while another's, started later,
sees the last hash arrive. The pass makes Inductor skip its caches under
"free" (`FxSchedulePass.uuid`), so no rank loads a cached graph while the
others exchange.
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import timedelta
from typing import Any

KEY = "overlapsat/agree/v1"
_EXCHANGES = itertools.count()  # process-wide: every rank counts the same compiles in the same sequence


def collective_sequence(graph: Any) -> list[str]:
    """The FX graph's collectives (every c10d op but the wait, and symmetric memory's ops) in node order: what
    this rank will issue."""
    seq = []
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        target = str(getattr(n.target, "_name", n.target))  # 'namespace::op' or 'namespace::op.overload'
        ns, _, op = target.partition("::")
        if "c10d" in ns and not op.startswith("wait_tensor"):
            seq.append(n.name)
        elif ns == "symm_mem":  # a copy-engine collective (a plan's transport): its op is part of what is issued
            seq.append(f"{n.name} ({op})")
    return seq


def sequence_digest(names: list[str]) -> str:
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def _peers() -> tuple[Any, int, int] | None:
    """(store, rank, world) of the default process group; None where this process is every rank there is (one
    process, or the fake process group); raises NoProcessGroup where there is no process group at all."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise NoProcessGroup
    if dist.get_world_size() <= 1 or dist.get_backend() == "fake":  # fake: one real process stands for every rank
        return None
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store(), dist.get_rank(), dist.get_world_size()


class NoProcessGroup(Exception):
    """This process has no process group, so it cannot tell whether peers exist (a compile subprocess, say)."""


def agree(names: list[str], *, timeout_s: float = 1800.0) -> tuple[bool, str]:
    """(True, "") when every rank of the default group is about to issue the collectives `names`, in this
    order; else (False, why). Never raises.

    Without a process group a graph with collectives cannot be agreed on (Inductor may be compiling in a
    subprocess of a multi-rank job), so it is refused; one without collectives has nothing to agree on."""
    n = next(_EXCHANGES)
    digest = sequence_digest(names)
    try:
        peers = _peers()
        if peers is None:
            return True, ""
        store, rank, world = peers
        store.set(f"{KEY}/{n}/{rank}", digest)
        keys = [f"{KEY}/{n}/{r}" for r in range(world)]
        store.wait(keys, timedelta(seconds=timeout_s))
        others = [store.get(k).decode() for k in keys]
    except NoProcessGroup:
        if names:
            return False, "this process has no process group to agree with"
        return True, ""
    except Exception as e:  # noqa: BLE001 - no answer is a "no": this rank restores its graph
        return False, f"the exchange failed ({type(e).__name__}: {e})"
    differ = [r for r, d in enumerate(others) if d != digest]
    if differ:
        return False, f"rank(s) {', '.join(map(str, differ))} would issue the collectives in another order"
    return True, ""


__all__ = ["agree", "collective_sequence", "sequence_digest"]
