"""A plan whose buckets are chosen by the contended walk instead of MODEL.md's makespan, offline (run 88's `_cont`).

    python benchmarks/gpu/probes/contended_plan.py RUN_DIR --collective-order group --profile PROFILE \
        --out store.tar.gz [--solve-s 60]

Re-solves the plans of a run's stored graphs (configuration `p`) with `optimize_plan`, except that every order
its bucket search ranks is ranked by `simulate_contended` (H200_STEP, the estimate the verdict tables print)
in place of the plain makespan. The CP-SAT search, the final pick and every status and bound stay MODEL.md's:
this is an experiment on which bucketing the search keeps, not a library option. Writes the plans as a store
archive that `plan_step.sh` applies without solving (`STORE_FROM`), and prints per graph the plan's collectives
and both estimates, beside the stored plan's.

Why a probe: runs 87-88 found the plain makespan ranking plans against the measured step (decision 54's plans
price shorter and run slower) where the contended walk ranked them right; whether choosing by it pays is a GPU
question, asked here first.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tarfile
import tempfile
from contextlib import contextmanager

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import unpack_store  # noqa: E402


@contextmanager
def ranked_by_contention():
    """Inside: the plan search's portfolio rows report the contended walk's makespan as theirs (valid rows only),
    so its hill climb, finalists and bucket moves rank bucketings by it."""
    import overlapsat.solver.plan_search as ps
    from overlapsat.cost.interference import H200_STEP, simulate_contended
    from overlapsat.evaluate import Evaluated

    @dataclasses.dataclass
    class Contended(Evaluated):
        contended: float = 0.0

        @property
        def makespan(self) -> float:
            return self.contended

    plain = ps.run_all

    def run_all(problem, **kw):
        rows = plain(problem, **kw)
        return [r if not r.valid else Contended(**{f.name: getattr(r, f.name) for f in dataclasses.fields(Evaluated)},
                                                 contended=simulate_contended(r.sim.graph, r.order, H200_STEP).makespan)
                for r in rows]

    ps.run_all = run_all
    try:
        yield
    finally:
        ps.run_all = plain


def estimates(store: str, collective_order: str, profile: str) -> list[dict]:
    """Per stored graph: collectives after buckets, MODEL.md's makespan and the contended walk of its plan (us),
    as the step's own prediction (`e2e_step.predict`) gives them, so that they read as the verdict tables do."""
    from benchmarks.gpu.e2e_step import predict

    return [{"graph": r["file"], "collectives": r.get("collectives_after_buckets", r["collectives"]),
             "plain_us": r["solved"]["makespan_us"], "contended_us": r["solved"]["contended_makespan_us"]}
            if "solved" in r else {"graph": r["file"], "error": "no usable plan"}
            for r in predict(store, collective_order, profile)["graphs"]]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--collective-order", required=True)
    ap.add_argument("--profile", required=True, help="the run's pricing (a profile name or file)")
    ap.add_argument("--out", required=True, help="the store archive to write (store/p/...)")
    ap.add_argument("--solve-s", type=float, default=60.0)
    a = ap.parse_args(argv)
    if not a.out.endswith(".tar.gz") or not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        ap.error(f"--out must be a .tar.gz in an existing folder, got {a.out!r}")
    from overlapsat.store import graph_path, recorded, solve_one

    old = os.path.join(unpack_store(os.path.join(a.run, "store.tar.gz")), "store", "p")
    work = tempfile.mkdtemp()
    new = os.path.join(work, "store", "p")
    os.makedirs(new)
    for fp in recorded(old):
        shutil.copy(graph_path(old, fp), new)
    with ranked_by_contention():  # in this process: solve_store's workers would not see the swap
        for fp in recorded(new):
            solve_one(new, fp, a.solve_s, {"collective_order": a.collective_order, "plans": a.profile})
    with tarfile.open(a.out, "w:gz") as t:
        t.add(os.path.join(work, "store"), arcname="store")
    for label, store in (("stored", old), ("contended", new)):
        print(json.dumps({"plan": label, "graphs": estimates(store, a.collective_order, a.profile)}), flush=True)


if __name__ == "__main__":
    main()
