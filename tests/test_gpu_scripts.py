"""The GPU scripts' trace analysis on synthetic profiler traces (the first GPU run failed in it; #13)."""

import json
import pathlib

import pytest

from benchmarks.gpu.interference import summarise
from benchmarks.gpu.trace_stats import analyse_trace

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _trace(tmp_path, name, events):
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": n, "ts": ts, "dur": d,
                                              "args": {"grid": [g, 1, 1]}} for n, ts, d, g in events]}))
    return str(p)


def test_exposed_communication_and_in_step_slowdown(tmp_path):
    # an all_gather [0,10) half hidden by a GEMM [5,15); a GEMM alone [20,28); an all_gather alone [30,36)
    t = _trace(tmp_path, "t.json", [("ncclDevKernel_AllGather", 0, 10, 24), ("sm90_gemm", 5, 10, 132),
                                     ("sm90_gemm", 20, 8, 132), ("ncclDevKernel_AllGather", 30, 6, 24)])
    r = analyse_trace(t, steps=1)
    assert r["exposed_comm_us"] == 5 + 6 and r["comm_busy_us"] == 16 and r["kernel_span_us"] == 36
    assert r["compute_kernels"]["slowdown"] == 10 / 8  # the overlapped GEMM against the one alone
    assert r["nccl_kernels"]["slowdown"] == 10 / 6  # the half-hidden all_gather (50 % counts) against the lone one


def test_interference_pairs_against_alone(tmp_path):
    alone = _trace(tmp_path, "a.json", [("ncclAllGather", 0, 10, 24), ("sm90_gemm", 20, 8, 132)])
    paired = _trace(tmp_path, "p.json", [("sm90_gemm", 0, 12, 132), ("ncclAllGather", 1, 15, 24)])
    r = summarise(alone, paired)
    assert r["gemm"]["slowdown"] == 12 / 8 and r["comm"]["slowdown"] == 1.5 and r["nccl_ctas"] == 24


def test_contention_fit_recovers_known_slowdowns():
    """Kernel times made by the contention model at known factors are fitted back to those factors; a run
    made at other factors moves the fit (so the fit reads the measurements)."""
    from benchmarks.gpu.contention import fit
    from overlapsat import GraphBuilder
    from overlapsat.cost.interference import Interference, simulate_contended

    b = GraphBuilder()
    b.collective("c1", group="g", duration=30.0)
    b.compute("x1", 20.0)
    b.wait("w1", "c1")
    b.collective("c2", group="g", duration=10.0)
    b.compute("x2", 40.0)
    b.wait("w2", "c2")
    g = b.build()
    order = list(range(len(g.nodes)))

    def run(kc, kn):
        r = simulate_contended(g, order, Interference(kc, kn))
        res = {"configs": {"d": {"ranks": [{"step_ms_median": r.makespan / 1e3, "profile": {
            "exposed_comm_us": r.exposed, "compute_kernels": {"time_us": r.compute_busy},
            "nccl_kernels": {"time_us": r.comm_busy}}}]}}}
        return res, [(g, None, order)]

    got = fit([run(1.3, 1.2)])
    assert (got.compute_slowdown, got.comm_slowdown) == (1.3, 1.2)
    got = fit([run(1.6, 1.1)])
    assert (got.compute_slowdown, got.comm_slowdown) == (1.6, 1.1)


def test_interference_table_ranges_over_ranks():
    from benchmarks.gpu.interference import table

    def row(rank, order, gs, cs, over):
        return {"gemm_n": 64, "kind": "all_gather", "payload_mib": 8, "order": order, "rank": rank, "nccl_ctas": 24,
                "gemm": {"alone_us": 10.0, "slowdown": gs, "overlapped_count": over, "count": 20},
                "comm": {"alone_us": 5.0, "slowdown": cs, "overlapped_count": 0, "count": 20}}

    rows = [row(0, "comm_first", 1.5, 2.0, 20), row(1, "comm_first", 1.25, None, 20), row(0, "gemm_first", None, None, 1),
            row(1, "gemm_first", None, None, 0)]
    assert table(rows)[2] == "| 64^3 | all_gather | 8 | 10 | 1.25-1.50 | 5 | 2.00 | 24 | 1 of 80 |"


def test_step_exposure_skips_nothing_and_separates_kernel_gaps(tmp_path):
    """Two steps, listed out of time order as traces are: step 1's collective starts 20 us before any compute
    (a profiler-start wait), step 2's is hidden but for a 4 us gap between two kernels. Mean, median, and the
    part inside kernel gaps, worked by hand."""
    t = _trace(tmp_path, "s.json", [("sm90_gemm", 120, 30, 132), ("ncclAllGather", 100, 40, 24),
                                     ("sm90_gemm", 20, 10, 132), ("ncclAllGather", 0, 25, 24),
                                     ("sm90_gemm", 154, 20, 132)])
    r = analyse_trace(t, steps=2)
    # step 1: [0,25) against compute [20,30): 20 exposed; step 2: [100,140) against [120,150) and [154,174): 20
    assert r["exposed_comm_us"] == (20 + 20) / 2
    assert r["exposed_median_step_us"] == 20
    assert r["exposed_in_kernel_gaps_us"] == 0  # the 4 us gap [150,154) has no NCCL kernel in it
    t = _trace(tmp_path, "g.json", [("sm90_gemm", 0, 10, 132), ("sm90_gemm", 14, 10, 132),
                                     ("ncclAllGather", 5, 15, 24)])
    r = analyse_trace(t, steps=1)
    assert r["exposed_comm_us"] == 4 and r["exposed_in_kernel_gaps_us"] == 4
    assert r["exposed_median_step_outside_kernel_gaps_us"] == 0


def test_holes_at_collective_starts(tmp_path):
    """A collective starting inside a 6 us gap between two kernels, another while a kernel runs."""
    from benchmarks.gpu.probes.launch_check import holes

    t = _trace(tmp_path, "h.json", [("gemm", 0, 10, 132), ("gemm", 16, 10, 132), ("gemm", 28, 10, 132),
                                     ("ncclAllGather", 12, 30, 24), ("ncclAllGather", 30, 5, 24)])
    r = holes(t)
    assert r["hole_at_nccl_start_mean_us"] == 3 and r["nccl_starts_in_a_hole"] == 0.5
    assert r["compute_gap_median_us"] == 4 and r["compute_gap_mean_us"] == 4


def test_waits_on_nccl_count_only_holes_a_collective_finishes_in(tmp_path):
    """The measure fixed before runs 13 on, worked by hand on two steps. Step 1: compute [0,10) [14,24)
    [50,60); NCCL [5,20) runs across the launch gap [10,14) and ends under compute (no wait), [26,45) ends in
    the hole [24,50) (19 waited), [47,70) starts after that completion (not a wait until compute ends: [60,70)
    is, 10). Step 2 (from its first NCCL kernel at 100): [100,105) before compute (5), [110,120) across the
    gap [115,117) (no wait), [131,133) after the last kernel (2)."""
    t = _trace(tmp_path, "w.json", [("sm90_gemm", 0, 10, 132), ("sm90_gemm", 14, 10, 132),
                                     ("sm90_gemm", 50, 10, 132), ("ncclAllGather", 5, 15, 24),
                                     ("ncclAllGather", 26, 19, 24), ("ncclAllGather", 47, 23, 24),
                                     ("sm90_gemm", 108, 7, 132), ("sm90_gemm", 117, 13, 132),
                                     ("ncclAllGather", 100, 5, 24), ("ncclAllGather", 110, 10, 24),
                                     ("ncclAllGather", 131, 2, 24)])
    r = analyse_trace(t, steps=2, skip=1)
    assert r["steps_after_warmup"] == 1
    assert r["waits_on_nccl_us"] == 5 + 2 and r["waits_on_nccl_median_step_us"] == 7
    assert r["exposed_after_warmup_us"] == 5 + 2 + 2  # the old reading also counts the launch gap [115,117)
    r = analyse_trace(t, steps=2)
    assert r["waits_on_nccl_us"] == (19 + 10 + 7) / 2
    assert r["exposed_comm_us"] == (4 + 19 + 3 + 10 + 5 + 2 + 2) / 2  # unchanged: the measure of runs 1-12


def test_nccl_held_back_by_a_running_kernel(tmp_path):
    """By hand: K0 [0,50) launched first; N1 launched after it may start at 50, but K1 (launched after N1,
    [50,250)) takes the SMs and N1 starts at 250: held back 200 us. N2 (launched after K1) may start when K1
    and N1 [250,260) end, and starts 2 us later: under HELD_US, not counted."""
    from benchmarks.gpu.trace_stats import held_back

    def k(name, ts, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"correlation": corr}}

    def launch(ts, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernelEx", "ts": ts, "dur": 1,
                "args": {"correlation": corr}}

    ev = [k("sm90_gemm", 0, 50, 1), k("ncclAllGather", 250, 10, 2), k("sm90_gemm", 50, 200, 3),
          k("ncclAllGather", 262, 5, 4), launch(-40, 1), launch(-39, 2), launch(-38, 3), launch(-37, 4)]
    assert held_back(ev, steps=1, skip=0) == {"nccl_held_back_us": 200}
    ev[2]["ts"], ev[2]["dur"] = 300, 10  # K1 runs after N1 instead: nothing holds N1 (it starts late, alone)
    ev[1]["ts"] = 250
    assert held_back(ev, steps=1, skip=0) == {"nccl_held_back_us": 0}


def _queued_behind_gemm(tail_us: float | None = None):
    """c1 (10) and c2 (10) issued at 0 on group g; w1; a GEMM g (20) that needs c1; w2; then k, which reads c2's
    output and g's (through k0 of `tail_us` after g, when given), in that input order."""
    from overlapsat import GraphBuilder

    b = GraphBuilder()
    b.collective("c1", group="g", duration=10.0, writes={"A": 4})
    b.collective("c2", group="g", duration=10.0, writes={"B": 4})
    b.wait("w1", "c1")
    b.compute("g", 20.0, reads=["A"], writes={"X": 4}, gemm_like=True)
    b.wait("w2", "c2")
    last = "X"
    if tail_us is not None:
        b.compute("k0", tail_us, reads=["X"], writes={"Y": 4})
        last = "Y"
    b.compute("k", 0.0, reads=["B", last], writes={"O": 1}, outputs=["O"])
    return b.build()


def test_boundary_rule_defers_a_queued_transfer_past_the_gemm_its_predecessor_released():
    """The re-gather pattern by hand: c1 (10) and c2 (10) issued at 0 on one group; w1; a GEMM g (20) that
    needs c1; w2. MODEL.md: c2 runs [10,20) beside g [10,30), exposed 10 (the wait for c1). The boundary rule:
    c2 becomes ready at 10 as g starts, so it runs [30,40) and w2 waits until 40: exposed 20. Input order."""
    from benchmarks.gpu.probes.boundary_rule import walk
    from overlapsat import simulate

    gr = _queued_behind_gemm()
    assert walk(gr, None, boundary=False) == simulate(gr).exposed == 10
    assert walk(gr, None) == 20
    # a partial hold: c2 is ready at 10 with g's 20 us left; hold 0.5 starts it at 20, so it runs [20,30) and
    # ends with g: w2 costs nothing more, exposed 10 (the wait for c1); hold 0.75 starts it at 25: [25,35), 15
    assert walk(gr, None, hold=0.5) == 10
    assert walk(gr, None, hold=0.75) == 15
    assert walk(gr, None, hold=1.0) == walk(gr, None) and walk(gr, None, hold=0.0) == walk(gr, None, boundary=False)


def test_hold_polish_moves_a_wait_past_compute_when_the_transfer_is_held_and_keeps_model_figures():
    """c2 queues behind c1 and becomes ready as the GEMM g starts. Under the hold 0.7 it runs [24,34); waiting for
    it right after g (w2, then k0 5 us) makes 39, exposed 14; MODEL.md's walk says 35, exposed 10 either way.
    Sinking w2 past k0 gives 35 under both rules: the polish finds it and keeps MODEL.md's makespan and peak."""
    from benchmarks.gpu.probes.boundary_rule import walk
    from overlapsat import simulate
    from overlapsat.cost import polish_held
    from overlapsat.validate import is_valid

    gr = _queued_behind_gemm(tail_us=5.0)
    assert walk(gr, None, hold=0.7) == pytest.approx(14) and simulate(gr).exposed == 10
    ids = polish_held(gr, gr.input_order, hold=0.7).order
    names = [gr.names[i] for i in ids]
    assert names.index("w2") > names.index("k0") and is_valid(gr, ids, None)
    assert walk(gr, ids, hold=0.7) == pytest.approx(10)
    before, after = simulate(gr), simulate(gr, ids)
    assert after.makespan <= before.makespan and after.peak_memory <= before.peak_memory


def _snapshot_run(tmp_path, workspace: int, outside: int) -> int:
    """A run folder as `e2e_step --snapshot` leaves it, built from a small graph: a generated module whose
    lines assign the graph's buffers, and allocator events that follow MODEL.md's walk exactly, plus
    `outside` bytes live before the graph and a `workspace` allocated and freed inside the peak node; the
    graph's model peak."""
    import lzma

    from overlapsat import GraphBuilder, save_graph, simulate

    b = GraphBuilder("bw")
    b.input("buf0", 64, freeable=True)
    b.collective("op1", op="all_gather", reads=["buf0"], writes={"buf1": 256})
    b.wait("op2", "op1")
    b.compute("op3", 1.0, reads=["buf1"], writes={"buf3": 512})
    b.compute("op4", 1.0, reads=["buf3"], writes={"buf4": 128}, outputs=["buf4"])
    g = b.build()
    af = tmp_path / "after_fusion_d_mem"
    snap = tmp_path / "snapshot_d_mem"
    af.mkdir()
    snap.mkdir()
    save_graph(g, str(af / "after_fusion_1.graph.json"))
    lines = ["def call(args):"]
    line_of = {}
    for nm in ("buf1", "buf3", "buf4"):
        call = "torch.ops._c10d_functional.all_gather_into_tensor.default(x)" if nm == "buf1" else "kernel(x)"
        lines.append(f"    {nm} = {call}")
        line_of[nm] = len(lines)
    (snap / "mod.py").write_text("\n".join(lines) + "\n")
    events = [["alloc", 1, outside, "e2e_step.py:1:step"]]  # live before the graph, beyond its inputs
    addr = {"buf1": 11, "buf3": 13, "buf4": 14}
    pos = {n: i for i, n in enumerate(g.names)}
    for nm in g.names:
        for buf in g.buffers:
            if buf.producer == nm:
                events.append(["alloc", addr[buf.name], buf.size_alloc, f"mod.py:{line_of[buf.name]}"])
                if nm == "op3" and workspace:  # inside the kernel: allocated after its output, freed at once
                    events += [["alloc", 99, workspace, f"mod.py:{line_of[buf.name]}"],
                               ["free_requested", 99, workspace, f"mod.py:{line_of[buf.name]}"],
                               ["free_completed", 99, workspace, f"mod.py:{line_of[buf.name]}"]]
        for buf in g.buffers:
            last = max((pos[c] for c in buf.consumers), default=None)
            if last == pos[nm] and not buf.output:
                a = addr.get(buf.name, 50)  # the input's block was allocated before the trace
                events += [["free_requested", a, buf.size_free, "-"], ["free_completed", a, buf.size_free, "-"]]
    with lzma.open(snap / "events.json.xz", "wt", encoding="utf-8") as fo:
        json.dump({"base_allocated_bytes": 64, "events": events}, fo)
    return simulate(g).peak_memory


@pytest.mark.parametrize("workspace", [0, 1000])
def test_memory_snapshot_splits_the_peak_into_outside_model_and_workspace(tmp_path, workspace):
    from benchmarks.gpu.probes.memory_snapshot import analyse

    model_peak = _snapshot_run(tmp_path, workspace, outside=4096)
    out = analyse(str(tmp_path), "d_mem")
    # by hand: op1 holds buf0 and buf1 (320), frees buf0; op3 adds buf3 to buf1 (768), the peak
    assert model_peak == 256 + 512 == out["model_peak_bytes"]
    assert out["outside_graph_bytes"] == 4096
    assert out["peak_node"] == "op3" and out["model_at_peak_node_bytes"] == model_peak
    assert out["transient_at_peak_bytes"] == workspace
    assert out["peak_bytes"] == 4096 + model_peak + workspace and out["unexplained_at_peak_bytes"] == 0
    assert out["collective_gaps_bytes"] == {"count": 1, "exact": 1, "min": 0, "max": 0}


def test_code_walk_counts_reuse_as_held_and_aliases_as_one_block():
    from benchmarks.gpu.probes.code_memory import walk

    body = "\n".join([
        "self, args):",
        "    assert_size_stride(primals_1, (4, 4), (4, 1), 'input')",  # 64 B from the start
        "    buf0 = empty_strided_cpu((8, 4), (4, 1), torch.float32)",  # 128 B
        "    buf1 = reinterpret_tensor(buf0, (32,), (1,), 0)",  # a view: no new block
        "    del primals_1",
        "    buf2 = empty_strided_cpu((16, 4), (4, 1), torch.float32)",  # 256 B: 128 + 256 live
        "    del buf0",  # buf1 still views the block
        "    buf3 = buf1; del buf1  # reuse",  # the 128 B block taken over
        "    buf4 = empty_strided_cpu((16, 4), (4, 1), torch.float32)",  # 256 B: 128 + 256 + 256 = 640 peak
        "    del buf2",
        "    del buf3",
        "    del buf4",
    ])
    assert walk(body) == 128 + 256 + 256


def test_per_kernel_slowdown_alone_against_overlapped(tmp_path):
    """Launches under NCCL for over 90 % of their time against those under it for under 5 %, per kernel and
    grid; one partly overlapped launch counts in neither."""
    from benchmarks.gpu.kernel_contention import by_class, per_kernel
    from benchmarks.gpu.run_files import trace_kernels

    ev = [("nvjet_256x128", 100 * i, 100, 132) for i in range(3)]  # alone: 100 us each
    ev += [("ncclDevKernel_AllGather", 1000 + 300 * i, 250, 24) for i in range(3)]
    ev += [("nvjet_256x128", 1010 + 300 * i, 190, 132) for i in range(3)]  # inside each transfer: 190 us
    ev += [("nvjet_256x128", 1900, 100, 132), ("ncclDevKernel_AllGather", 1950, 20, 24)]  # 20 % overlapped
    ev += [("triton_poi_add", 2100 + 10 * i, 5, 64) for i in range(3)]  # alone only: no row
    rows = per_kernel(trace_kernels(_trace(tmp_path, "k.json", ev)))
    assert len(rows) == 1
    r = rows[0]
    assert (r["alone_us"], r["overlapped_us"], r["n_alone"], r["n_overlapped"]) == (100, 190, 3, 3)
    assert r["slowdown"] == 1.9 and r["class"] == "gemm, one wave" and r["extra_us"] == 3 * 90
    assert by_class(rows)["gemm, one wave"]["slowdown"] == 1.9


def test_gemm_launches_tagged_by_size_from_the_stored_orders(tmp_path):
    """One kernel serving two sizes is two rows once each launch is tagged with its node's flops; the step's
    sequence is the forward graph's GEMMs then the backward's (the one receiving tangents), each in its
    stored order; a trace that is not whole steps, or launches two kernels at one position, is refused."""
    import tarfile

    from benchmarks.gpu.kernel_contention import per_kernel, step_gemms, tag_gemms
    from benchmarks.gpu.run_files import trace_kernels

    store = tmp_path / "store" / "d"
    store.mkdir(parents=True)

    def graph(name, gemms, tangents):
        nodes = [{"name": f"{name}{i}", "kind": "compute", "duration": 1.0, "flops": f, "gemm_like": True}
                 for i, f in enumerate(gemms)] + [{"name": f"{name}x", "kind": "compute", "duration": 1.0}]
        bufs = [{"name": "tangents_1#0", "producer": None, "consumers": [f"{name}0"], "size_alloc": 8,
                 "size_free": 8}] if tangents else []
        (store / f"{name}.graph.json").write_text(json.dumps({"nodes": nodes, "buffers": bufs}))
        order = [n["name"] for n in reversed(nodes)]  # the stored order, not the file's
        (store / f"{name}.schedule.json").write_text(json.dumps({"order": order}))

    graph("a_bw", [3e9, 5e9], tangents=True)  # sorts first by file name, runs second
    graph("b_fw", [7e9], tangents=False)
    with tarfile.open(tmp_path / "store.tar.gz", "w:gz") as t:
        t.add(tmp_path / "store", arcname="store")
    step = step_gemms(str(tmp_path))
    assert step == [7e9, 5e9, 3e9]

    # six steps; the forward GEMM and the backward's 5 GFLOP one share a kernel, 3 GFLOP runs another
    ev, ts = [], 0
    for s in range(6):
        for name, dur in (("nvjet_A", 100), ("nvjet_A", 250), ("nvjet_B", 40)):
            over = s % 2 == 1  # odd steps run inside a transfer
            ev.append((name, ts, dur * (2 if over and name == "nvjet_A" else 1), 132))
            if over:
                ev.append(("ncclDevKernel_AllGather", ts - 1, dur * 2 + 2, 24))
            ts += 1000
    kernels = trace_kernels(_trace(tmp_path, "k.json", ev))
    rows = {(r["kernel"], r["flops"]): r for r in per_kernel(tag_gemms(kernels, step))}
    assert (rows[("nvjet_A", 7e9)]["alone_us"], rows[("nvjet_A", 7e9)]["slowdown"]) == (100, 2.0)
    assert (rows[("nvjet_A", 5e9)]["alone_us"], rows[("nvjet_A", 5e9)]["slowdown"]) == (250, 2.0)
    assert rows[("nvjet_B", 3e9)]["slowdown"] == 1.0
    untagged = per_kernel(kernels)  # by name alone the two sizes mix: median of 100s and 250s
    assert [r["alone_us"] for r in untagged if r["kernel"] == "nvjet_A"] == [175]
    with pytest.raises(ValueError, match="whole number of steps"):
        tag_gemms([e for e in kernels if e["ts"] != 0], step)  # the first GEMM left out
    with pytest.raises(ValueError, match="GEMM 0 of the step launches nvjet_A and nvjet_B"):
        tag_gemms(kernels, [1.0, 2.0])  # 18 launches are 9 steps of 2, but position 0 runs both kernels


def test_window_check_reads_step_times_from_the_first_gemm_of_each_step(tmp_path):
    """Steps start at every n-th GEMM launch; the first gap (the profiler's start) is left out; a window whose
    median step is longer than the timed median is flagged, against a hand-made results.json."""
    from benchmarks.gpu.probes.window_check import check, window_steps_ms

    ev, t = [], 0
    for gap in (90_000, 50_000, 52_000, 60_000, 51_000):  # us: five steps of two GEMMs and a transfer each
        ev += [("nvjet_a", t, 100, 132), ("ncclDevKernel_AllGather", t + 200, 300, 24), ("nvjet_b", t + 600, 100, 132)]
        t += gap
    ev.append(("nvjet_a", t, 100, 132))  # the sixth step's first GEMM ends the fifth step
    ev.append(("nvjet_b", t + 600, 100, 132))
    path = _trace(tmp_path, "trace_d.json", ev)
    from benchmarks.gpu.run_files import trace_kernels

    assert window_steps_ms(trace_kernels(path), 2) == [50.0, 52.0, 60.0, 51.0]
    assert window_steps_ms(trace_kernels(path), 5) == []  # 12 GEMMs are not whole steps of 5
    (tmp_path / "results.json").write_text(json.dumps({"configs": {"d": {"ranks": [
        {"step_ms_median": 50.0, "profile": {"exposed_comm_us": 2500.0}}]}}}))
    (r,) = check(str(tmp_path), 2)
    assert (r["window_ms"], r["ratio"], r["flagged"], r["waits_ms"]) == (51.5, 1.03, True, 2.5)


def test_traces_read_alike_plain_gzip_and_xz(tmp_path):
    """The same events from a trace kept plain, as .gz (runs before 27) and as .xz; a run's .xz is preferred and
    a run without any trace is named in the error."""
    import gzip
    import lzma

    from benchmarks.gpu.run_files import run_trace, trace_kernels

    plain = _trace(tmp_path, "trace_d.json", [("ncclDevKernel_AllGather", 0, 10, 24), ("sm90_gemm", 5, 10, 132)])
    body = open(plain, "rb").read()
    # a CPU-side event in the same file is no kernel
    doc = json.loads(body)
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 3})
    body = json.dumps(doc).encode()
    with gzip.open(tmp_path / "trace_d.json.gz", "wb") as f:
        f.write(body)
    with lzma.open(tmp_path / "trace_d.json.xz", "wb") as f:
        f.write(body)
    want = trace_kernels(plain)
    assert [e["name"] for e in want] == ["ncclDevKernel_AllGather", "sm90_gemm"]
    assert trace_kernels(str(tmp_path / "trace_d.json.gz")) == want == trace_kernels(str(tmp_path / "trace_d.json.xz"))
    assert run_trace(str(tmp_path)).endswith("trace_d.json.xz")
    with pytest.raises(SystemExit, match="trace_c.json.xz"):
        run_trace(str(tmp_path), "c")


def test_carveout_table_against_cublas_alone():
    """Every setting's GEMM median against cuBLAS alone for the same shape, alone and beside the occupier."""
    from benchmarks.gpu.probes.carveout_probe import SETTINGS, SHAPES, table

    rows = []
    for lib, carve in SETTINGS:
        for name, *_ in SHAPES:
            for beside in (False, True):
                alone = 100.0 if lib == "cublas" else 100.0 + carve  # 124 us at carveout 24
                us = alone * (1.9 if beside and carve < 24 else 1.0)
                rows.append({"lib": lib, "carveout": carve, "shape": name, "beside": beside,
                             "gemm_us": [us, us + 2, us - 2], "grid": [f"[{132 - carve}, 1, 1]"]})
    t = table({"device": "H200", "torch": "2.11", "sms": 132, "reps": 3, "occ_us": 165.0, "rows": rows})
    assert "| qkvo_fwd | cublas | [132, 1, 1] | 100.0 | 190.0 | 1.00 | 1.90 |" in t
    assert "| mlp_dw | cublaslt -24 | [108, 1, 1] | 124.0 | 124.0 | 1.24 | 1.24 |" in t
    assert "| mlp_dw | cublaslt -16 | [116, 1, 1] | 116.0 | 220.4 | 1.16 | 2.20 |" in t


def test_the_results_page_verdict_is_what_the_raw_files_give(tmp_path):
    """docs/gpu_results.md's medians and the committed verdict table come from the raw files, not by hand."""
    import runpy

    verdict = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "verdict.py"))
    rs = verdict["rows"]()
    med = verdict["medians"](rs)
    assert round(100 * med["comparable (no re-gather), 2 GPUs"][0], 2) == -4.94
    assert med["comparable (no re-gather), 2 GPUs"][1] == 12
    assert round(100 * med["re-gather in backward, 2 GPUs"][0], 2) == -1.39
    page = (ROOT / "docs" / "gpu_results.md").read_text()
    assert "-4.94 % (median of 12 passes)" in page and "-1.39 %" in page and len(page.encode()) < 25_000
    # torch's scheduler did not bucket: as many NCCL kernels per step as no reordering, in every pass that has both
    assert all(r["kernels"]["c"] == r["kernels"]["a"] for r in rs if r["kernels"].get("a") and r["kernels"].get("c"))
    committed = (ROOT / "benchmarks" / "results" / "gpu_verdict.md").read_text()
    assert verdict["table"](rs) in committed


def test_the_plan_verdict_is_what_the_raw_files_give(capsys):
    """docs/gpu_results.md's verdict (runs 68-87), its earlier pricings (runs 52-67) and the committed generated
    tables come from the raw files: each step time, margin and prediction the page prints is recomputed here."""
    import json
    import runpy

    pv = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "plan_verdict.py"))
    page = (ROOT / "docs" / "gpu_results.md").read_text()

    def ms(res, cfg):
        return res["configs"][cfg]["ranks"][0]["step_ms_median"]

    def pct(a, b):
        return f"{100 * (a / b - 1):+.1f} %"

    # the verdict: 40 us per issue, three or four calls a step, each solved again to the same plan (equal predictions)
    d27 = ROOT / "benchmarks" / "results" / "gpu_2026-11-27"
    steps = {"comparable": (68, 72, 79), "tp": (69, 74, 78, 81), "regather": (70, 73, 77), "fsdp4": (71, 75, 80)}
    labels = {"comparable": "comparable", "tp": "2-way TP x 2-way FSDP", "regather": "re-gather",
              "fsdp4": "FSDP x4"}  # the prediction table's rows
    for step, calls in steps.items():
        runs = [json.loads((d27 / f"run{n}_{step}_host40" / "results.json").read_text()) for n in calls]
        assert len({pv["predicted"](r, "p") for r in runs}) == 1, step
        plain, contended = pv["predicted"](runs[0], "p")
        row = next(line for line in page.splitlines() if line.startswith(f"| {labels[step]} | {plain:.2f} ms"))
        assert f"{plain:.2f} ms | {contended:.2f} ms | " in row, step
        for r in runs:
            assert r["meta"]["args"]["profile"].endswith("h100_sxm_host40.json")
            assert f"{ms(r, 'p'):.2f}" in row, (step, "measured")
            assert pct(contended, ms(r, "p")).removesuffix(" %") in row, (step, "contended")
            assert all(len(r["configs"][c]["ranks"][0]["applied_graphs"]) == 2 for c in ("p", "tbb", "d")
                       if c in r["configs"]), step
            for cfg in ("p", "c_bkt", "tbb_torch", "tbb", "d"):
                if cfg in r["configs"]:
                    assert f"{ms(r, cfg):.2f}" in page, (step, cfg)
            for base in ("c_bkt", "tbb_torch", "tbb"):
                if base in r["configs"]:
                    assert pct(ms(r, "p"), ms(r, base)) in page, (step, base)
        torch_tbb = next(r for r in runs if "tbb_torch" in r["configs"])["configs"]["tbb_torch"]["ranks"][0]
        passes = torch_tbb["torch_tbb"]  # torch's pass bucketed, one bucket per block and kind
        assert all(p["blocks_seen"] == 8 for p in passes) and passes[0]["collectives_after"] < 25, step
        assert torch_tbb["applied_graphs"] == []  # overlapsat stayed out of torch's TBB
    # runs 82-84: the 2-GPU steps on H200s, priced as on the H100s, so solved again to the same plans
    for step, calls in {"comparable": (83,), "regather": (82, 84)}.items():
        h100 = json.loads((d27 / f"run{steps[step][0]}_{step}_host40" / "results.json").read_text())
        plain, contended = pv["predicted"](h100, "p")
        pred_row = next(line for line in page.splitlines() if line.startswith(f"| {labels[step]} | {plain:.2f} ms"))
        for n in calls:
            r = json.loads((d27 / f"run{n}_{step}_h200_host40" / "results.json").read_text())
            assert "H200" in r["meta"]["gpu"] and r["meta"]["args"]["profile"].endswith("h100_sxm_host40.json")
            assert pv["predicted"](r, "p") == (plain, contended), (step, n)
            p_ms = ms(r, "p")
            row = next(line for line in page.splitlines() if line.startswith(f"| | {n}, H200 | **{p_ms:.2f} ms** |"))
            assert f"| {ms(r, 'c_bkt'):.2f} | {ms(r, 'tbb_torch'):.2f} |" in row, (step, n)
            assert f"{pct(p_ms, ms(r, 'c_bkt'))}: {'met' if p_ms < 0.9 * ms(r, 'c_bkt') else 'missed'}" in row
            assert f"{pct(p_ms, ms(r, 'tbb_torch'))}: met" in row and p_ms <= ms(r, "tbb_torch")
            assert f"{p_ms:.2f}" in pred_row and pct(contended, p_ms).removesuffix(" %") in pred_row, (step, n)
            passes = r["configs"]["tbb_torch"]["ranks"][0]["torch_tbb"]
            assert all(q["blocks_seen"] == 8 for q in passes) and passes[0]["collectives_after"] < 25, (step, n)
    # runs 86-87: FSDP x4's plan under decision 54, and run 80's plan applied as stored beside it
    r80, r86 = (json.loads((d27 / f"run{n}_fsdp4_host40" / "results.json").read_text()) for n in (80, 86))
    old, new = (json.loads((d27 / f"run87_fsdp4_{w}_plan_host40" / "results.json").read_text()) for w in ("old", "new"))
    assert old["meta"]["args"]["store_from"].endswith("run80_fsdp4_host40/store.tar.gz")
    assert old["configs"]["p"]["ranks"][0]["applied_graphs"] == r80["configs"]["p"]["ranks"][0]["applied_graphs"]
    assert pv["predicted"](r86, "p") == pv["predicted"](new, "p") != pv["predicted"](r80, "p")
    t87 = ms(new, "tbb_torch")
    for label, res, cells in (("86, decision 54", r86, f"| {ms(r86, 'c_bkt'):.2f} | {ms(r86, 'tbb_torch'):.2f} |"),
                              ("87, run 80's plan", old, f"| not run | {t87:.2f} |"),
                              ("87, decision 54", new, f"| not run | {t87:.2f} |")):
        row = next(line for line in page.splitlines() if line.startswith(f"| | {label} | **{ms(res, 'p'):.2f} ms** "))
        assert cells in row and pct(ms(res, "p"), ms(r86, "tbb_torch") if res is r86 else t87) in row, label
    assert pct(ms(r86, "p"), ms(r86, "c_bkt")) + ": met" in page
    plain, contended = pv["predicted"](new, "p")
    row = next(line for line in page.splitlines() if line.startswith("| FSDP x4, decision 54 |"))
    r89 = json.loads((d27 / "run89_fsdp4_decision54" / "results.json").read_text())  # the same plan, a third call
    assert row.startswith(f"| FSDP x4, decision 54 | {plain:.2f} ms | {contended:.2f} ms | {ms(r86, 'p'):.2f}, "
                          f"{ms(new, 'p'):.2f}, {ms(r89, 'p'):.2f} ms")
    assert all(pct(contended, ms(r, "p")).removesuffix(" %") in row for r in (r86, new, r89))
    assert f"{100 * (ms(new, 'p') / ms(old, 'p') - 1):.1f} % slower" in page  # the A/B in one call
    # runs 88-90: decision 54's plans, the contended-ranked plan, fewer NCCL CTAs and the re-fitted prices; each
    # row's reference is the `c_bkt` of the same call
    def run(name):
        return json.loads((d27 / name / "results.json").read_text())

    def price(res):
        return res["meta"]["args"]["profile"].removeprefix("benchmarks/gpu/h100_sxm_")

    ref88, ref90 = run("run88_regather_def"), run("run90_regather_launch55")
    rows = {"88, decision 54": (ref88, ref88, "host40.json"),
            "88, contended-ranked plan": (run("run88_regather_cont"), ref88, "host40.json"),
            "90, 50 us per issue": (run("run90_regather_launch50"), ref90, "host50.json"),
            "90, 55 us per issue": (ref90, ref90, "host55.json")}
    fs89, fs90, tp89 = run("run89_fsdp4_decision54"), run("run90_fsdp4_launch55"), run("run89_tp_decision54")
    cont = rows["88, contended-ranked plan"][0]
    assert cont["meta"]["args"]["store_from"].endswith("regather_cont60.tar.gz")
    assert pv["predicted"](cont, "p") != pv["predicted"](ref88, "p")  # another plan than the one solved in the call
    for label, (res, ref, prof) in rows.items():
        assert price(res) == prof and "H100" in res["meta"]["gpu"], label
        p_ms, c_ms = ms(res, "p"), ms(ref, "c_bkt")
        row = next(line for line in page.splitlines() if line.startswith(f"| | {label} | **{p_ms:.2f} ms** | {c_ms:.2f} |"))
        assert f"{pct(p_ms, c_ms)}: {'met' if p_ms < 0.9 * c_ms else 'missed'}" in row, label
    for label, res, tbb in (("89, decision 54", fs89, f"{ms(fs89, 'tbb_torch'):.2f}"), ("90, 55 us per issue", fs90, "not run")):
        row = next(line for line in page.splitlines() if line.startswith(f"| | {label} | **{ms(res, 'p'):.2f} ms** "
                                                                         f"| {ms(res, 'c_bkt'):.2f} | {tbb} |"))
        assert f"{pct(ms(res, 'p'), ms(res, 'c_bkt'))}: missed" in row, label
    assert pv["predicted"](fs89, "p") == pv["predicted"](new, "p") and price(fs90) == "host55.json"
    row = next(line for line in page.splitlines() if line.startswith(f"| | 89, decision 54 | **{ms(tp89, 'p'):.2f} ms** "))
    assert f"| {ms(tp89, 'c_bkt'):.2f} | {ms(tp89, 'tbb_torch'):.2f} |" in row and pct(ms(tp89, "p"), ms(tp89, "c_bkt")) in row
    cta8 = run("run88_regather_cta8")
    assert cta8["meta"]["nccl_env"]["NCCL_MAX_CTAS"] == "8" and "NCCL_MAX_CTAS" not in ref88["meta"]["nccl_env"]
    notes = (ROOT / "docs" / "history" / "gpu_results_2026-11-26.md").read_text()  # moved there on 2026-11-30
    assert f"slowed the plan by {100 * (ms(cta8, 'p') / ms(ref88, 'p') - 1):.0f} % and `c_bkt` by " \
           f"{100 * (ms(cta8, 'c_bkt') / ms(ref88, 'c_bkt') - 1):.0f} %" in " ".join(notes.split())
    for label, res in (("re-gather, decision 54", ref88), ("2-way TP x 2-way FSDP, decision 54", tp89),
                       ("re-gather, contended-ranked", cont), ("FSDP x4, 55 us", fs90)):
        plain, contended = pv["predicted"](res, "p")
        row = next(line for line in page.splitlines() if line.startswith(f"| {label} |"))
        assert row.startswith(f"| {label} | {plain:.2f} ms | {contended:.2f} ms | {ms(res, 'p'):.2f} ms"), label
        assert pct(contended, ms(res, "p")).removesuffix(" %") in row, label
    # runs 91-94, the verdict: coalesced buckets (decision 55), each margin against the same call's torch runs
    verdict = {("comparable, 2 GPUs", "92"): "run92_comparable_coalesced", ("re-gather, 2 GPUs", "91"):
               "run91_regather_coalesced", ("", "93"): "run93_regather_coalesced",
               ("FSDP x4", "94"): "run94_fsdp4_coalesced", ("2-way TP x 2-way FSDP, 4 GPUs", "94"): "run94_tp_coalesced"}
    for (label, n), name in verdict.items():
        res = run(name)
        assert price(res) == "host40.json" and "H100" in res["meta"]["gpu"], name
        assert res["configs"]["p_co"]["ranks"][0]["applied_graphs"] and len(
            res["configs"]["p_co"]["ranks"][0]["applied_graphs"]) == 2, name
        cells = [f"**{ms(res, 'p_co'):.2f} ms**", f"{ms(res, 'c_bkt'):.2f}"]
        cells += [f"{ms(res, c):.2f}" if c in res["configs"] else "not run" for c in ("tbb_torch", "p")]
        p_co, c_bkt = ms(res, "p_co"), ms(res, "c_bkt")
        target = f"**{pct(p_co, c_bkt)}: {'met' if p_co < 0.9 * c_bkt else 'missed'}**"
        tbb = "-"
        if "tbb_torch" in res["configs"]:
            tbb = f"**{pct(p_co, ms(res, 'tbb_torch'))}: {'met' if p_co <= ms(res, 'tbb_torch') else 'missed'}**"
        want = f"| {label} | {n} | ".replace("|  |", "| |") + " | ".join(cells) + f" | {target} | {tbb} |"
        assert want in page, want
        loss = [res["configs"][c]["ranks"][0]["loss_compiled"] for c in res["configs"]]
        assert max(abs(x / res["configs"]["c_bkt"]["ranks"][0]["loss_compiled"] - 1) for x in loss) < 1.2e-4, name
    probe = json.loads((d27 / "run91_regather_coalesced" / "coalesced.json").read_text())
    layer = next(r for r in probe["rows"] if r["bucket"] == "layer")
    assert (f"the group call took {layer['coalesced_ms']:.3f} ms, flat {layer['flat_ms']:.3f} ms, copied "
            f"{layer['copy_ms']:.3f} ms, and nine separate gathers {layer['separate_ms']:.3f} ms") in " ".join(page.split())
    for label, names in (("comparable, coalesced", ("run92_comparable_coalesced",)),
                         ("re-gather, coalesced", ("run91_regather_coalesced", "run93_regather_coalesced")),
                         ("FSDP x4, coalesced", ("run94_fsdp4_coalesced",)),
                         ("2-way TP x 2-way FSDP, coalesced", ("run94_tp_coalesced",))):
        rs = [run(nm) for nm in names]
        assert len({pv["predicted"](r, "p_co") for r in rs}) == 1, label  # the same plan solved in each call
        plain, contended = pv["predicted"](rs[0], "p_co")
        row = next(line for line in page.splitlines() if line.startswith(f"| {label} |"))
        assert row.startswith(f"| {label} | {plain:.2f} ms | {contended:.2f} ms | "
                              + ", ".join(f"{ms(r, 'p_co'):.2f}" for r in rs)), label
        assert all(pct(contended, ms(r, "p_co")).removesuffix(" %") in row for r in rs), label
    r76 = json.loads((d27 / "run76_fsdp4_host40" / "results.json").read_text())  # d and p only
    assert f"| 76 | {ms(r76, 'p'):.2f} ms | not run | not run | not run | {ms(r76, 'd'):.2f} |" in page
    # earlier pricings: the compact table's cells, on the history page since 2026-11-29
    page = (ROOT / "docs" / "history" / "gpu_results_2026-11-26.md").read_text()
    d26 = ROOT / "benchmarks" / "results" / "gpu_2026-11-26"
    for name in ("run52_comparable", "run62_comparable", "run54_regather", "run55_fsdp4", "run56_tp", "run64_tp_host",
                 "run66_tp_host", "run65_comparable_host"):
        res = json.loads((d26 / name / "results.json").read_text())
        row = next(line for line in page.splitlines() if f"({name[3:5]}) | {ms(res, 'p'):.2f} ms" in line)
        for base in ("c_bkt", "tbb"):
            if base in res["configs"]:
                assert f"| {ms(res, base):.2f} |" in row and pct(ms(res, "p"), ms(res, base)) in row, (name, base)
        assert row.endswith(f"| {pct(pv['predicted'](res, 'p')[1], ms(res, 'p'))} |"), name
    # the budgeted plan: MODEL.md's peak of each graph within 1.0x its captured order's, as the page says
    r55 = json.loads((d26 / "run55_fsdp4" / "results.json").read_text())
    assert r55["meta"]["args"]["memory_budget"] == 1.0
    for g in r55["prediction_p_mem"]["graphs"]:
        assert g["solved"]["peak_bytes"] <= g["captured"]["peak_bytes"]
        assert f"{g['solved']['peak_bytes'] / 1e6:,.1f}" in page
    pv["main"]([])
    assert capsys.readouterr().out == (ROOT / "benchmarks" / "results" / "gpu_plan_verdict.md").read_text()
    pv["main"]([str(d27)])
    assert capsys.readouterr().out == (d27 / "plan_verdict.md").read_text()


def test_tbb_buckets_cut_each_kind_into_blocks_and_leave_other_collectives_alone():
    """The GPU step's TBB plan: per kind, a graph's collectives in its order cut into runs of the block's
    parameter count (two blocks of three here); a kind whose count is no multiple (an all_reduce) is left
    unbucketed. Hand-written expectation."""
    from benchmarks.gpu.e2e_step import tbb_buckets
    from overlapsat import GraphBuilder

    b = GraphBuilder("two_blocks")
    for i in range(6):
        b.input(f"p{i}", 8)
        b.collective(f"ag{i}", op="all_gather", reads=[f"p{i}"], writes={f"f{i}": 16}, nbytes=16)
        b.wait(f"w{i}", f"ag{i}")
    b.compute("k", 1.0, reads=[f"f{i}" for i in range(6)], writes={"h": 4})
    b.collective("ar", op="all_reduce", reads=["h"], writes={"hr": 4}, nbytes=4)
    b.wait("war", "ar")
    for i in range(6):
        b.compute(f"g{i}", 1.0, reads=["hr"], writes={f"gr{i}": 16})
        b.collective(f"rs{i}", op="reduce_scatter", reads=[f"gr{i}"], writes={f"s{i}": 8}, nbytes=16)
        b.wait(f"ws{i}", f"rs{i}")
    g = b.build()
    assert tbb_buckets(g, 3) == [["ag0", "ag1", "ag2"], ["ag3", "ag4", "ag5"], ["rs0", "rs1", "rs2"],
                                 ["rs3", "rs4", "rs5"]]
    assert tbb_buckets(g, 4) == []  # six of each kind: no whole blocks of four


def test_host_bound_splits_idle_time_into_launch_starved_and_waiting(tmp_path):
    """Run 63's reading of every rank's trace, on a hand-made one: a compute kernel launched (through the driver
    API, as Triton does) after its predecessor ended starves the GPU for the launch's lateness; one launched in
    time does not; host time between launches is split by what the second launch issues."""
    from benchmarks.gpu.probes.host_bound import host_bound

    def k(name, ts, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"correlation": corr}}

    def launch(cat, ts, dur, corr):
        return {"ph": "X", "cat": cat, "name": "launch", "ts": ts, "dur": dur, "args": {"correlation": corr}}

    ev = [k("gemm", 0, 10, 1), k("ncclDevKernel_AllReduce_Sum_bf16", 12, 8, 3), k("triton_a", 30, 10, 2),
          k("triton_b", 45, 5, 4), launch("cuda_runtime", -5, 2, 1), launch("cuda_runtime", 8, 1, 3),
          launch("cuda_driver", 20, 5, 2), launch("cuda_driver", 26, 2, 4)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    r = host_bound(str(p))
    assert r["span_us"] == 50 and r["compute_idle_us"] == 25 and r["launch_starved_us"] == 15
    assert r["nccl"] == {"AllReduce": {"kernels": 1, "sum_us": 8}}
    assert r["host_before_launch"]["collective"] == {"launches": 1, "median_us": 13, "mean_us": 13}
    assert r["host_before_launch"]["compute"] == {"launches": 2, "median_us": 9, "mean_us": 9}


def test_host_walk_starts_each_kernel_after_its_issue_and_the_host_never_waits():
    """The host-timeline walk of probes/host_walk.py, hand-computed: GPU-bound (the host runs ahead and costs
    nothing) and host-bound (every kernel waits for its issue; the host does not wait for a collective)."""
    from benchmarks.gpu.probes.host_walk import host_walk
    from overlapsat.graph import Node, NodeKind

    nodes = {n.name: n for n in (Node("a", NodeKind.COMPUTE, 10.0),
                                 Node("c", NodeKind.COLLECTIVE, 20.0, group="g", op="all_gather", nbytes=8),
                                 Node("w", NodeKind.WAIT, 0.0, collective="c"), Node("b", NodeKind.COMPUTE, 5.0))}

    class G:
        node = staticmethod(nodes.__getitem__)

    order = ["a", "c", "w", "b"]
    # a: issued at 3, runs [3, 13); c: issued at 7, runs [13, 33); b: issued at 10, runs after the wait [33, 38)
    assert host_walk(G, order, 3.0, 4.0) == 38.0
    # a: [10, 20); c: issued at 60, runs [60, 80); b: issued at 70, waits for c: [80, 85)
    assert host_walk(G, order, 10.0, 50.0) == 85.0
    assert host_walk(G, order, 0.0, 0.0) == 35.0  # MODEL.md's walk with no launch


def test_launch_sweep_prices_each_collectives_issue_and_nothing_else():
    """probes/launch_sweep.py's graph: every collective's launch set, every other node as it was; at 0 the
    bundled graph (no launches) is the same graph, fingerprint included."""
    from benchmarks.gpu.probes.launch_sweep import with_launch
    from overlapsat import NodeKind, load_graph
    from overlapsat.examples import bundled

    g = load_graph(bundled("fsdp_small"))
    h = with_launch(g, 40.0)
    for a, b in zip(g.nodes, h.nodes):
        assert b.launch == (40.0 if a.kind is NodeKind.COLLECTIVE else a.launch)
        assert (a.name, a.duration, a.nbytes) == (b.name, b.duration, b.nbytes)
    assert h.fingerprint() != g.fingerprint() and with_launch(g, 0.0).fingerprint() == g.fingerprint()


def test_kernel_classes_split_a_step_by_class_and_time_under_nccl():
    """Run 85's reading of the re-gather step (kernel_classes.py), on a hand-made trace of two steps: a kernel's
    class comes from its name (Inductor's pure-copy kernels carry no op), its time under NCCL from the union of
    the NCCL kernels; and the committed run log holds the table the script prints for run 85."""
    from benchmarks.gpu.probes.kernel_classes import by_class, kernel_class, table

    assert kernel_class("ncclDevKernel_AllGather_RING_LL") == "nccl"
    assert kernel_class("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == "gemm"
    assert kernel_class("cudnn_generated_fort_native_sdpa_sm90_flash_fprop") == "attention"
    for copy in ("triton_poi_fused_12", "triton_for_fused_0", "triton_poi_fused_view_3", "triton_poi_fused"):
        assert kernel_class(copy) == "copy (Triton, no op)", copy
    for op in ("triton_poi_fused_add_mul_3", "triton_poi_fused_clone_transpose", "triton_red_fused__to_copy_add_5"):
        assert kernel_class(op) == "other Triton", op
    assert kernel_class("void at::native::vectorized_elementwise_kernel<4>") == "other"

    def k(name, ts, dur):
        return {"name": name, "ts": ts, "dur": dur}

    ks = [k("ncclDevKernel_AllGather", 0, 100), k("ncclDevKernel_ReduceScatter", 80, 20),
          k("ncclDevKernel_AllGather", 150, 50), k("nvjet_a", 50, 100), k("triton_poi_fused_1", 150, 20),
          k("triton_poi_fused_add_2", 300, 40)]
    fig = by_class(ks, 2)
    assert fig["gemm"] == pytest.approx((100 / 1e3 / 2, 0.5, 0.5))  # 50 of its 100 us under [0, 100]
    assert fig["copy (Triton, no op)"] == pytest.approx((0.01, 1.0, 0.5))
    assert fig["other Triton"] == pytest.approx((0.02, 0.0, 0.5))
    assert fig["nccl"][0] == pytest.approx(150 / 1e3 / 2)  # [0, 100] and [150, 200]: the overlap counted once
    run85 = ROOT / "benchmarks" / "results" / "gpu_2026-11-27" / "run85_regather_traces_host40"
    assert table(str(run85), ["d", "p", "tbb"]) in (run85.parent / "runs.md").read_text()


def test_contended_plan_ranks_the_plan_search_by_the_contended_walk_and_restores_it():
    """probes/contended_plan.py (run 88's `_cont`): inside its context the plan search's portfolio rows carry the
    contended walk's makespan (checked against simulate_contended directly), and after it the plain one again."""
    import overlapsat.solver.plan_search as ps
    from benchmarks.gpu.probes.contended_plan import ranked_by_contention
    from overlapsat import Problem, load_graph, simulate
    from overlapsat.cost.interference import H200_STEP, simulate_contended
    from overlapsat.examples import bundled

    pb = Problem.of(load_graph(bundled("fsdp_small")), None, "group")
    plain = ps.run_all
    with ranked_by_contention():
        rows = [r for r in ps.run_all(pb) if r.valid]
        assert rows
        for r in rows:
            assert r.makespan == simulate_contended(r.sim.graph, r.order, H200_STEP).makespan
            assert r.makespan >= simulate(r.sim.graph, r.order).makespan
        assert any(r.makespan > simulate(r.sim.graph, r.order).makespan for r in rows)  # an overlapping order
    assert ps.run_all is plain
    assert all(r.makespan == simulate(r.sim.graph, r.order).makespan for r in ps.run_all(pb) if r.valid)


def test_rank_zeros_memory_on_the_fake_group_is_what_the_raw_files_give():
    """The one-GPU memory runs of 2026-12-02: the committed table is what `fake_memory.py` computes from the
    results now; the stand-in equals the NCCL runs to the byte on `a` (independent runs of other days), and a
    default-budget plan over its budget is counted against `a`'s measured peak of its own call."""
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake"
    assert fm["page"](str(folder)) == (folder / "table.md").read_text()
    rows = fm["rows"](str(folder))
    a_rows = [r for r in rows if r["config"] == "a" and r["nccl"] is not None]
    assert len(a_rows) == 8 and all(r["peak"] == r["nccl"] for r in a_rows)
    over = {r["step"]: r["peak"] - r["budget"] for r in rows if r["budget"] is not None}
    assert over == {"eq": 0, "tp2_regather": 3 * 2**20, "tp2_regather_again": 3 * 2**20, "w4_regather": 23_820_800,
                    "w4_regather_rounds": 0, "tp2_regather_loss_in_graph": 15_750_144,
                    "tp2_regather_loss_in_graph_trial": 3 * 2**20, "w4_regather_trial": 0,
                    "newshape_w4_regather": 0, "newshape_w4_tp2_regather": -512 * 1024,
                    "newshape_w4_tp2_regather_again_info": -512 * 1024,
                    "newshape_w4_tp2_regather_again_pins": -512 * 1024, "shape3_w4": 0,
                    "shape3_w4_tp2_regather": 33_816_576, "shape3_w4_tp2_regather_again_snapshot": 33_816_576,
                    "shape3_w4_tp2_regather_111": 0, "tp2_regather_111": 3 * 2**20, "w4_regather_111": 0,
                    "shape3_w4_tp2_regather_111_again_emitted": 0}
    # decision 110: with the trial lowering, the plans' tensors ask for no more than the captured order's
    assert all(r["requested"] == r["a_requested"] for r in rows if r["step"].endswith("_trial"))


def test_with_expandable_segments_the_default_budget_holds_to_the_byte():
    """The one-GPU runs of 2026-12-03 under `expandable_segments:True`: the committed table is what
    `fake_memory.py` computes from the results; every default-budget plan measures `a`'s peak of its own call to the
    byte (the 10-layer TP x FSDP step, 3 MiB over under the default allocator on 2026-12-02, read from that folder),
    and each measured peak is the bytes the tensors asked for plus less than 512 B a block of rounding."""
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = ROOT / "benchmarks" / "results" / "gpu_2026-12-03_expandable"
    default = ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake"
    assert fm["expandable_page"](str(folder), str(default), fm["EXPANDABLE"]) == (folder / "table.md").read_text()
    rows = fm["rows"](str(folder))
    held = {r["step"]: r["peak"] - r["budget"] for r in rows if r["budget"] is not None}
    assert held == {"tp2_regather": 0, "shape3_w4_tp2_regather": 0, "w4_regather": 0, "newshape_w4_tp2_regather": 0,
                    "eq": 0, "shape3_w4": 0}
    before = {r["step"]: r["peak"] - r["budget"] for r in fm["rows"](str(default)) if r["budget"] is not None}
    assert before["tp2_regather_111"] == 3 * 2**20
    assert all(0 <= r["peak"] - r["requested"] < 64 * 1024 and r["peak"] % 512 == 0 for r in rows)


def test_the_nccl_runs_unexplained_miss_is_its_days_way_of_applying_buckets():
    """The one NCCL row whose whole-step prediction missed 5 % (eqshape_w4_regather `p_free`, 2026-11-28: -6.2 %):
    its own plan store, applied by the library of 2026-12-02 on one GPU (`--store-from`), measures 228,712,448 B
    less than that run on rank 0, where `a` measures that run's peak to the byte, and the prediction is within 1.3 %;
    the applied backward graph had 2,254 nodes there and 2,177 here (decision 81's copy ops came the day after)."""
    import json
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake"
    rows = {r["config"]: r for r in fm["rows"](str(folder)) if r["step"] == "w4_regather_1128store"}
    meta = json.loads((folder / "w4_regather_1128store" / "results.json").read_text())["meta"]["args"]
    assert meta["store_from"].endswith("gpu_2026-11-28/eqshape_w4_regather/second/store.tar.gz")
    assert rows["a"]["peak"] == rows["a"]["nccl"] == 3_382_692_864
    free = rows["p_free"]
    assert free["replayed"] and free["nccl"] == 4_905_163_776 and free["peak"] - free["nccl"] == -228_712_448
    assert abs(free["step_predicted"] / free["peak"] - 1) < 0.013 < abs(free["step_predicted"] / free["nccl"] - 1)
    assert free["applied"] == [1017, 2177] and free["nccl_applied"] == [1023, 2254]


def test_the_trial_with_the_plans_pins_sets_aside_the_plan_the_check_found_over():
    """Decision 110 on the GPU: without the pins the trial applied the new shape's backward plan and the check
    after fusion found it over; with them the trial reads the check's figure (1,084,454,992 B, the ninth call's
    check line) over the same budget and sets the plan aside, and no check finds an applied plan over."""
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = str(ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake")
    before = fm["trial_log"](folder, "newshape_w4_tp2_regather_again_info")
    after = fm["trial_log"](folder, "newshape_w4_tp2_regather_again_pins")
    g = "243e036b94037ad29d2bbb563f4fb8bd"
    assert before[g]["applied"] and before[g]["check_over"]
    assert not after[g]["applied"] and after[g]["peak"] == 1_084_454_992 > after[g]["budget"] == before[g]["budget"]
    assert not any(v["check_over"] for v in after.values())


def test_a_set_aside_backward_graph_compiles_as_inductor_alone_would_with_decision_111():
    """The third shape's TP x FSDP step: before decision 111 its default-budget plan, whose backward plan the trial
    set aside, measured 33,816,576 B above `a`: the snapshots show that backward graph's code launching the same
    kernels as `a`'s in another order (Inductor's re-sorting by memory, which install_fx turns off, had not run on
    it); with decision 111 the plan measures `a`'s peak to the byte."""
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = str(ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake")
    launches = fm["backward_launches"](folder)
    assert len(launches["a"]) == 38 and sorted(launches["a"]) == sorted(launches["p_co"])
    assert launches["a"] != launches["p_co"]
    rows = {(r["step"], r["config"]): r for r in fm["rows"](folder)}
    before, after = rows["shape3_w4_tp2_regather", "p_co"], rows["shape3_w4_tp2_regather_111", "p_co"]
    assert before["peak"] - before["budget"] == 33_816_576 and after["peak"] == after["budget"]
    trial = fm["trial_log"](folder, "shape3_w4_tp2_regather_111")["646452a7a3a3c65d9c7ca6b467dc3193"]
    assert not trial["applied"] and trial["budget"] == 935_915_584  # read after Inductor's re-sorting
    # the harness reading what Inductor emits: the step's prediction within 1 % of a's requested bytes, not 2.2 %
    emitted = rows["shape3_w4_tp2_regather_111_again_emitted", "a"]
    assert abs(emitted["step_predicted"] / emitted["requested"] - 1) < 0.01
    assert rows["shape3_w4_tp2_regather_111", "a"]["step_predicted"] / emitted["requested"] - 1 > 0.02


def test_the_whole_steps_peak_is_the_model_the_workspaces_and_the_harness_loss():
    """The step's prediction (the graphs after fusion, the graphs' inputs, two 32-MiB GEMM workspaces and the eager
    loss's five fp32 copies of the output, hand-computed below) against the allocator's own figures: every row within
    5 % of the measured peak, and `a`'s requested peak (what the tensors asked for, before the allocator rounds)
    met to the byte on six steps' first runs (the third shape's FSDP step ran after the rule was written); what is
    held before each step is the inputs and the workspaces, plus at most 1,577,984 B of the allocator's blocks."""
    import json
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    folder = ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake"
    assert fm["GEMM_WORKSPACES"] == 64 * 2**20
    assert fm["LOSS_COPIES"] * 4 * 2560 * 3072 + fm["LOSS_SCALARS"] == 157_286_408  # the snapshot's loss blocks
    rows = [r for r in fm["rows"](str(folder)) if r["step_predicted"] is not None]
    assert len(rows) >= 40
    assert all(abs(r["step_predicted"] / r["peak"] - 1) <= 0.05 for r in rows)
    firsts = {"eq", "newshape_w4_regather", "newshape_w4_tp2_regather", "tp2_regather", "w4_regather", "shape3_w4"}
    a_rows = [r for r in rows if r["config"] == "a" and r["step"] in firsts]
    assert len(a_rows) == 6 and all(r["step_predicted"] == r["requested"] for r in a_rows)
    for step in firsts:
        d = json.loads((folder / step / "results.json").read_text())
        held = d["configs"]["a"]["ranks"][0]["allocated_before_steps_bytes"]
        assert 0 <= held - fm["primals_bytes"](d, "a") - fm["GEMM_WORKSPACES"] <= 1_577_984, step


def test_the_whole_steps_prediction_meets_the_tensors_bytes_on_nccl_too():
    """The same prediction on the 2- and 4-GPU NCCL runs of the verdict (made before it existed): `a`'s tensors on
    rank 0 asked for exactly the predicted bytes on the four steps whose runs kept every figure, one of them the
    tensor-parallel step that peaks in the eager loss; 46 of the 47 rows with a figure within 5 % of measured."""
    import json

    from benchmarks.gpu.equal_memory import LATEST, saved_in, step_predicted_within, step_prediction

    results = ROOT / "benchmarks" / "results"
    for run in ("gpu_2026-11-30_eq/eqshape_co", "gpu_2026-11-30_w4/eq_w4", "gpu_2026-11-30_w4/eqshape_w4",
                "gpu_2026-11-30_w4/eqshape_w4_tp2_regather"):
        assert run in LATEST
        d = json.loads((results / run / "results.json").read_text())
        pred = step_prediction(d, "a", saved_in(str(results / run)))
        assert pred == d["configs"]["a"]["ranks"][0]["memory"]["requested_bytes_peak"], run
    assert "have a figure (a reading after fusion and a kept plan store), and it is within 5 % of the measured " \
           "peak on 46 " in step_predicted_within(str(results)) and " 47 rows" in step_predicted_within(str(results))


def test_the_tensor_parallel_steps_peak_is_the_harness_loss_as_the_snapshot_gives():
    """`a` of the tensor-parallel re-gather step peaks in the eager loss between its graphs: at the snapshot's
    peak, what was held before the step, the blocks the FX model says the forward leaves for the backward (to the
    byte), and five fp32 copies of the (1, 3072, 2560) output (hand-computed) with two 4-B scalars sum to it."""
    import runpy

    fm = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "fake_memory.py"))
    x = fm["loss_phase"](str(ROOT / "benchmarks" / "results" / "gpu_2026-12-02_fake"))
    assert x["graphs"] == x["model_saved"] and x["base"] == x["held_before_steps"]
    assert x["loss_blocks"] == [4 * 3072 * 2560] * 5 + [4, 4]
    assert x["base"] + x["graphs"] + x["loss"] == x["peak"]
    assert x["requested_peak"] < x["peak"] < x["measured"]


def test_the_coalesced_plans_repriced_at_the_measured_group_call_time_are_what_the_raw_files_give():
    """Decision 56's before-and-after figures: the committed table is what the probe computes from runs 91-94's
    stored plans and results now, and the page and the decision quote its rows."""
    import runpy

    probe = runpy.run_path(str(ROOT / "benchmarks" / "gpu" / "probes" / "reprice_coalesced.py"))
    d27 = ROOT / "benchmarks" / "results" / "gpu_2026-11-27"
    got = probe["rows"](str(d27))
    assert "\n".join(got) + "\n" == (d27 / "reprice_coalesced.md").read_text()
    assert len(got) == 2 + 5 and all("| 10.5 |" in r for r in got[2:])
    after = [float(r.split("|")[-2].strip(" %")) for r in got[2:]]
    assert all(-10 < a < 0 for a in after)  # every step's estimate within 10 % at the measured time
    page = (ROOT / "docs" / "gpu_results.md").read_text()
    assert "-8.5 %" in page and "-1.8 to -8.5 %" in page


def test_torchs_ordering_wrappers_are_put_back_as_their_operations():
    """e2e_step.inline_control_deps (the prediction of torch's configurations' peaks): a graph whose nodes torch's
    scheduler wrapped in control_deps reads, once inlined, as the original operations in the same order, with
    unique names (the first GPU run that recorded torch's graphs failed on duplicate names)."""
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._ordered_set import OrderedSet

    cd = pytest.importorskip("torch._inductor.fx_passes.control_dependencies")
    from benchmarks.gpu.e2e_step import inline_control_deps

    def f(x, y):
        a = torch.ops.aten.sin.default(x)
        b = torch.ops.aten.cos.default(y)
        c = torch.ops.aten.add.Tensor(a, b)
        return torch.ops.aten.mul.Tensor(c, a)

    gm = make_fx(f)(torch.randn(4), torch.randn(4))
    nodes = {n.name: n for n in gm.graph.nodes}
    before = [(n.op, str(n.target)) for n in gm.graph.nodes]
    cd.preserve_node_ordering(gm.graph, {nodes["cos"]: OrderedSet([nodes["sin"]]),
                                         nodes["mul"]: OrderedSet([nodes["add"]])})
    assert any(n.target is cd.control_deps for n in gm.graph.nodes)
    out = inline_control_deps(gm.graph)
    calls = [(n.op, str(n.target)) for n in out.nodes if n.op != "get_attr"]
    assert calls == before
    names = [n.name for n in out.nodes]
    assert len(names) == len(set(names))


def test_the_readme_quotes_the_gpu_page_figures_only():
    """#52: every GPU percentage the README quotes is one docs/gpu_results.md or docs/sim_vs_gpu.md prints (and the
    tests above hold those pages to their raw files); the README names the baseline torch version."""
    import re

    readme = " ".join((ROOT / "README.md").read_text().split())
    page = " ".join((ROOT / "docs" / "gpu_results.md").read_text().split()
                    + (ROOT / "docs" / "sim_vs_gpu.md").read_text().split())  # its section on the baselines
    start = readme.index("**On GPUs**")
    gpu = readme[start:readme.index("## ", start)]
    quoted = re.findall(r"-?\d+\.\d+(?:-\d+\.\d+)? %", gpu)
    assert len(quoted) >= 6, quoted
    for q in quoted:
        assert q in page or q.lstrip("-") in page, q
    assert "torch 2.11" in gpu and "torch 2.13" in gpu


def test_gqa_flop_counts_give_torch_2_11_the_broadcast_count(monkeypatch):
    """torch 2.11's count rejected key and value with fewer heads than the query (titan02's failure); the shim
    counts such a call as its key and value broadcast to the query's heads, as torch 2.13 does: here the count
    of the same call with 32 key-value heads, worked by hand (two batched matmuls of 2*s*s*d FLOPs per head)."""
    import torch.utils.flop_counter as fc

    from benchmarks.gpu.titan_models import gqa_flop_counts

    def strict(query_shape, key_shape, value_shape):  # torch 2.11's check, then the plain count
        if query_shape[1] != key_shape[1]:
            raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")
        b, h, s, d = query_shape
        return 2 * (2 * b * h * s * s * d)

    monkeypatch.setattr(fc, "sdpa_flop_count", strict)
    monkeypatch.setattr(fc, "sdpa_backward_flop_count", lambda g, q, k, v: 2 * strict(q, k, v))
    with pytest.raises(AssertionError):
        fc.sdpa_flop_count((1, 32, 128, 64), (1, 8, 128, 64), (1, 8, 128, 64))
    gqa_flop_counts()
    assert fc.sdpa_flop_count((1, 32, 128, 64), (1, 8, 128, 64), (1, 8, 128, 64)) == 4 * 32 * 128 * 128 * 64
    assert fc.sdpa_backward_flop_count((1, 32, 128, 64), (1, 32, 128, 64), (1, 8, 128, 64),
                                       (1, 8, 128, 64)) == 8 * 32 * 128 * 128 * 64
    gqa_flop_counts()  # once only: a second call wraps nothing again
    assert fc.sdpa_flop_count((1, 32, 128, 64), (1, 32, 128, 64), (1, 32, 128, 64)) == 4 * 32 * 128 * 128 * 64


def test_blocking_host_copies_touches_only_copies_to_the_host():
    """The DeepSeek-V3 run's pre-pass: a device-to-host copy (prims.device_put or aten._to_copy to the CPU)
    becomes blocking; a dtype cast or a copy elsewhere keeps its flags."""
    import torch
    import torch.fx as fx

    from benchmarks.gpu.titan_models import blocking_host_copies

    g = fx.Graph()
    x = g.placeholder("x")
    put = g.call_function(torch.ops.prims.device_put.default, (x, torch.device("cpu"), True))
    copy = g.call_function(torch.ops.aten._to_copy.default, (x,), {"device": torch.device("cpu"), "non_blocking": True})
    cast = g.call_function(torch.ops.aten._to_copy.default, (x,), {"dtype": torch.float16, "non_blocking": True})
    away = g.call_function(torch.ops.prims.device_put.default, (x, torch.device("meta"), True))
    g.output((put, copy, cast, away))
    blocking_host_copies(g)
    assert put.kwargs == {"non_blocking": False} and len(put.args) == 2
    assert copy.kwargs["non_blocking"] is False
    assert cast.kwargs["non_blocking"] is True and away.args[2] is True


def test_the_traceable_expert_permutation_is_the_loop():
    """The dry run's permutation indices equal a plain loop over local experts and ranks (the semantics of
    torchtitan 0.2's fill_indices_cpu), on random counts, including empty chunks and a padded tail."""
    import torch

    from benchmarks.gpu.titan_models import _fill_indices_traceable

    def loop(counts, starts, offsets, experts, ranks, max_len):
        out = [-1] * max_len
        for e in range(experts):
            at = int(offsets[e])
            for r in range(ranks):
                i = r * experts + e
                for j in range(int(counts[i])):
                    if at + j < max_len:
                        out[at + j] = int(starts[i]) + j
                at += int(counts[i])
        return out

    gen = torch.Generator().manual_seed(0)
    for _ in range(100):
        experts, ranks = (int(torch.randint(1, 5, (1,), generator=gen)) for _ in range(2))
        counts = torch.randint(0, 6, (experts * ranks,), generator=gen)
        starts = counts.cumsum(0) - counts
        sizes = (counts.view(ranks, experts).sum(0).clamp_min(4) + 3) // 4 * 4
        offsets = sizes.cumsum(0) - sizes
        max_len = int(sizes.sum()) + int(torch.randint(0, 5, (1,), generator=gen))
        got = _fill_indices_traceable(counts, starts, offsets, experts, ranks, max_len)
        assert got.tolist() == loop(counts, starts, offsets, experts, ranks, max_len)
        assert got.dtype == torch.int32
