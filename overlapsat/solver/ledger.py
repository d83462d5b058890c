"""The plan search's one account of work (decision 79).

Every step of a deterministic plan search is priced in reference seconds, what it costs on a 2-core machine by the
graph's size, and every phase draws on one total, the time limit. A phase stops where its next step would take the
account past the phase's end (a share of the total, counted from the call's start), so what one phase leaves flows
to the next, the phases together never promise more than the limit, and the final order gets what they left. The
prices are counts times constants, so the same inputs take the same steps on any machine and load; the clock only
guards the promise (a cut is flagged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# reference seconds for one step: a fixed part and a part per node of the graph; measured on the FX corpus and the
# torchtitan EP graph (1k-13k nodes) on this 2-core machine, 2026-11-29, and set at about what each step took on
# the larger graphs (the per-node range measured in brackets; the fixed part is what the hill climb spends around
# a call on a 1k-node graph): a price set high moves work from the search to the final order, one set low lets
# the clock cut the search (flagged)
STEP_S: dict[str, tuple[float, float]] = {
    "score": (0.015, 2.6e-5),  # a bucketed graph built and ordered by the hill climb's few passes [18-52 us]
    "judge": (0.02, 1.1e-4),  # a bucketed graph built and ordered by the whole portfolio [58-155 us]
    "greedy": (0.0, 1.7e-5),  # torch's greedy bucketer at one cap [2-17 us]
    "room": (0.01, 3.6e-5),  # one exact check of a start within the budget's room, or one of its repairs [13-36 us]
    "graph": (0.005, 2.1e-5),  # one bucketed graph built [14-21 us]
    # one bucket move: its edit and the walk of its span and of the collectives and waits, with its share of the
    # memory checks and confirmations (decision 120; 2026-12-03, the 13 corpus graphs from their 10-s plans' move
    # starts, up to 3000 moves: 95-293 ns a node a move, setup included) [before decision 120: 0.25-0.64 us]
    "move": (0.0, 2.5e-7),
    "bound": (0.0, 1.5e-5),  # the analytical bound over every bucketing [about 15 us]
    "floor": (0.0, 9e-6),  # a bucketed graph's memory floor read before it is judged (decision 94) [7-9 us]
    # a caller's ordered bucketing checked (`solved_plans`: its buckets, its graph built and fingerprinted, its
    # order validated), 2026-12-01 [55-58 us]; uncharged, four of them took 2-4 s of a 10-s plan at 7.9k nodes
    # before any phase (decision 100)
    "solved": (0.0, 6e-5),
}
# the final `optimize` runs past its own time limit by its fixed costs (canonical form, portfolio, polish): it is
# given this share of what the phases left (measured 3.47 s for a 3-s limit at 984 nodes)
FINAL_FIT = 0.85


@dataclass
class Ledger:
    """What a plan search has spent, in reference seconds, by step; `total_s` is the time limit."""

    total_s: float
    nodes: int
    spent_s: float = 0.0
    by_step: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    final_s: float | None = None  # the final order's time limit, what the phases left (deterministic mode)

    def price(self, step: str, k: float = 1.0) -> float:
        fixed, per_node = STEP_S[step]
        return k * (fixed + per_node * max(1, self.nodes))

    def affords(self, step: str, until: float, k: float = 1.0) -> bool:
        """Whether `k` more of `step` end within `until` (a share of the total, from the call's start)."""
        return self.spent_s + self.price(step, k) <= until * self.total_s * (1 + 1e-12)

    def how_many(self, step: str, until: float) -> int:
        """How many of `step` fit before `until`."""
        return max(0, int((until * self.total_s - self.spent_s) / self.price(step) + 1e-9))

    def charge(self, step: str, k: float = 1.0) -> None:
        self.charge_s(step, self.price(step, k), int(k))

    def charge_s(self, step: str, seconds: float, count: int = 1) -> None:
        """A step priced by its own work limit (the joint model's share), not by the graph's size."""
        self.spent_s += seconds
        self.by_step[step] = self.by_step.get(step, 0.0) + seconds
        self.counts[step] = self.counts.get(step, 0) + count

    def left_s(self, reserved: float = 0.0) -> float:
        """What is left of the total, less `reserved` seconds promised to a later phase."""
        return max(0.0, self.total_s - self.spent_s - reserved)

    def stats(self) -> dict[str, object]:
        return {"total_s": self.total_s, "spent_s": round(self.spent_s, 6), "final_s": self.final_s,
                "by_step_s": {k: round(v, 6) for k, v in self.by_step.items()}, "counts": dict(self.counts)}
