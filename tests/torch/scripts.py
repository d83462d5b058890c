"""Running a compile test's script in a fresh interpreter (Inductor and the process group stay out of the
test process), and the handler those scripts use to count overlapsat's warnings."""

import contextlib
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pasted into a script after `import logging`: every warning overlapsat logs lands in `warnings`
CATCH_WARNINGS = """
warnings = []
class Catch(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())
logging.getLogger("overlapsat").addHandler(Catch())
"""


def run_script(script: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python -c script args...` with this checkout first on the path; fails the test if it exits non-zero."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                       env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def finish_rank(out: str, result: dict) -> None:
    """End a rank script: write its result, leave the process group, and exit without interpreter teardown.

    A gloo rank sometimes aborted after its work was done: "terminate called without an active exception",
    SIGABRT, with no Python frame on any thread, so during interpreter teardown (1 run in 25 of the two-rank
    tests on a 2-core machine, 2026-11-24; the message of a C++ thread destroyed while joinable). The result
    is complete and closed before `os._exit`, so nothing the test reads is lost; only the teardown is
    skipped."""
    import json

    import torch.distributed as dist

    with open(out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _graph_cache_settings() -> list[tuple]:
    """(config module, {setting: off}) for every cache that can skip a compile's passes."""
    import torch._dynamo.config as dcfg
    import torch._functorch.config as fcfg
    import torch._inductor.config as icfg

    return [(icfg, {"fx_graph_cache": False, "fx_graph_remote_cache": False}),
            (fcfg, {"enable_autograd_cache": False, "enable_remote_autograd_cache": False}),
            (dcfg, {"automatic_dynamic_local_pgo": False, "automatic_dynamic_remote_pgo": False})]


# the test session's shared cache of compiled C++ kernels (tests/torch/conftest.py): a script whose graph caches
# are off (`turn_graph_caches_off`) compiles there, so a kernel and Inductor's one-off CPU probes and headers are
# built once per session, not once per process (about 13 s each on a 2-core machine, 2026-11-27). The kernels'
# cache is keyed by their source, so sharing it changes no compile's passes, only its C++ build.
KERNELS_ENV = "OVERLAPSAT_TEST_KERNELS"


def use_kernel_cache(fallback: str | None = None) -> str:
    """Point Inductor at the session's kernel cache (`KERNELS_ENV`), else at `fallback`, else at a new folder;
    call it before anything imports torch (or before a compile in the test process). Returns the folder."""
    path = os.environ.get(KERNELS_ENV) or fallback or tempfile.mkdtemp()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path


def turn_graph_caches_off() -> None:
    """Inductor's FX graph cache, AOTAutograd's cache and dynamo's profile of dynamic shapes off for the rest of
    this process, so every compile runs overlapsat's passes on the same graph; the compiled kernels' cache stays
    on. `force_disable_caches` turns that one off too, and recompiled every C++ kernel in every compile: about
    40 % of a test that compiles one model three times, and of every phase of a rank test, whose ranks share
    one cache directory instead. The counters of a compile show both caches bypassed (tested)."""
    for mod, off in _graph_cache_settings():
        for k, v in off.items():
            setattr(mod, k, v)


@contextlib.contextmanager
def graph_caches_off() -> Iterator[None]:
    """`turn_graph_caches_off`, undone on leaving (for a test that compiles in the pytest process)."""
    with contextlib.ExitStack() as stack:
        for mod, off in _graph_cache_settings():
            stack.enter_context(mod.patch(off))
        yield


def start_rank() -> tuple[str, int, str, str, list[str]]:
    """Begin a rank script that `run_ranks` runs, before anything imports torch: read its argv (PHASE RANK WORLD
    INIT_FILE STORE OUT), give Inductor the session's kernel cache (`KERNELS_ENV`; else the test's own, beside
    INIT_FILE), join the gloo group, turn the graph caches
    off (`turn_graph_caches_off`), and collect overlapsat's warnings. Returns (phase, rank, store, out, the warnings
    list)."""
    import logging

    phase, rank, world, init_file, store, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:7]
    use_kernel_cache(os.path.join(os.path.dirname(os.path.abspath(init_file)), "inductor"))
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    turn_graph_caches_off()
    caught: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                caught.append(record.getMessage())

    logging.getLogger("overlapsat").addHandler(Catch())
    return phase, rank, store, out, caught


def run_ranks(script: str, phase: str, workdir, stores: list, tag: str = "", _retry: bool = True) -> list[dict]:
    """Run `script` (a file beside these tests) as one process per entry of `stores` (gloo ranks meeting at a
    file under `workdir`), with argv PHASE RANK WORLD INIT_FILE STORE OUT; each rank's OUT, read back as JSON.

    A rank killed by a signal reruns every rank once, with a warning carrying its stacks; any other failure
    fails at once. (The SIGABRT seen in about 1 run in 15 on a 2-core machine on 2026-11-23 was torch's
    teardown after the rank's work, 2026-11-24: `finish_rank` now skips it.)"""
    import json

    world = len(stores)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    init = workdir / f"pg_{phase}{tag}"
    outs = [workdir / f"{phase}{tag}{r}.json" for r in range(world)]
    here = os.path.dirname(os.path.abspath(__file__))
    # -X faulthandler: a rank killed by SIGABRT/SIGSEGV prints every thread's Python stack to its stderr
    procs = [subprocess.Popen([sys.executable, "-X", "faulthandler", os.path.join(here, script), phase, str(r),
                               str(world), str(init), str(stores[r]), str(outs[r])], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for r in range(world)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    if rerun_if_killed(procs, errs, _retry):
        return run_ranks(script, phase, workdir, stores, tag + "_rerun", _retry=False)
    return [json.loads(o.read_text()) for o in outs]


def rerun_if_killed(procs: list, errs: list[str], retry: bool) -> bool:
    """True where a rank was killed by a signal and `retry` allows the caller one rerun of every rank: said in
    the test report with every failing rank's stacks, so the abort stays visible while unexplained. Otherwise
    fails the test if any rank exited non-zero."""
    failed = [(r, p.returncode, e) for r, (p, e) in enumerate(zip(procs, errs)) if p.returncode != 0]
    if retry and any(rc < 0 for _, rc, _ in failed):
        warnings.warn("rank killed by a signal, rerun once:\n" + "\n".join(
            f"rank {r} exited {rc}:\n{e[-4000:]}" for r, rc, e in failed), stacklevel=3)
        return True
    # every failing rank, with its exit status: a rank that dies takes its peer down with a connection error,
    # so the first rank's message alone can hide the cause
    assert not failed, "\n".join(f"rank {r} exited {rc}:\n{e[-2500:]}" for r, rc, e in failed)
    return False


def doc_script(page: str, heading: str) -> str:
    """The first Python block under `## heading` in docs/PAGE: a job the page says runs as written."""
    import re

    with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
        text = f.read()
    return re.search(rf"## {re.escape(heading)}\n.*?```python\n(.*?)```", text, re.S).group(1)


def run_torchrun_job(tmp_path, script: str, filename: str, tag: str = "", retry: bool = True) -> list[tuple[str, str]]:
    """`script` as `filename` on two gloo ranks with torchrun's environment (RANK, WORLD_SIZE, MASTER_*), each
    rank in the job's own folder with its own Inductor cache; each rank's (stdout, stderr). A rank killed by a
    signal reruns both once (`rerun_if_killed`: gloo's sporadic aborts with collectives in flight,
    docs/torch.md, "Known problems"), from an empty folder."""
    import socket

    work = tmp_path / f"job{tag}"
    work.mkdir()
    (work / filename).write_text(script)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHINDUCTOR_CACHE_DIR=str(work / f"inductor{rank}"))
        procs.append(subprocess.Popen([sys.executable, "-X", "faulthandler", filename], cwd=work, env=env,
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=600) for p in procs]
    if rerun_if_killed(procs, [err for _out, err in outs], retry):
        return run_torchrun_job(tmp_path, script, filename, tag + "_rerun", retry=False)
    return outs
