"""Imports go one way: leaf <- core <- heuristics, solver, cost <- torch bridge <- compare <- CLI.

Every import counts, including those inside functions, so a lazy import
cannot hide a crossed layer. The library never imports the CLI.
"""

import ast
import pathlib

import overlapsat

PKG = pathlib.Path(overlapsat.__file__).parent

LAYER = {  # module (or package) -> layer
    "errors": 0, "fmt": 0, "gc_pause": 0, "_process": 0,
    "graph": 1, "io": 1, "budget": 1, "simulate": 1, "validate": 1, "bounds": 1, "canonical": 1, "evaluate": 1,
    "schedules": 1, "problem": 1, "plan": 1,
    "heuristics": 2, "solver": 2, "cost": 2,
    "torch": 3, "examples": 3, "store": 3,
    "compare": 4, "frontier": 4, "plot": 4, "trace": 4, "__init__": 4,
    "cli": 5, "__main__": 5, "_entry": 5,
}
# the solver runs the heuristic portfolio (and the contention polish, which cost owns); the bridge reads and
# writes the store
SIBLINGS_ALLOWED = {("solver", "heuristics"), ("solver", "cost"), ("torch", "store")}
FORBIDDEN = {("io", "validate"), ("io", "simulate")}  # file formats stay below the ground truth


def unit(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def imports(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("overlapsat."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "overlapsat":
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("overlapsat."))
    return out


def crossings() -> list[str]:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        src = unit(path)
        for dst in imports(path):
            if dst == src or dst not in LAYER:
                continue
            if (src, dst) in FORBIDDEN:
                bad.append(f"{path.relative_to(PKG)} imports {dst}")
            elif LAYER[dst] > LAYER[src] or (LAYER[dst] == LAYER[src] and LAYER[src] == 2
                                              and (src, dst) not in SIBLINGS_ALLOWED):
                bad.append(f"{path.relative_to(PKG)} (layer {LAYER[src]}) imports {dst} (layer {LAYER[dst]})")
    return bad


def test_every_module_has_a_layer():
    units = {unit(p) for p in PKG.rglob("*.py")}
    assert units <= set(LAYER), f"modules without a layer: {sorted(units - set(LAYER))}"


def test_imports_go_one_way():
    assert crossings() == []


def test_the_check_can_fail(tmp_path, monkeypatch):
    fake = PKG / "graph.py"
    text = fake.read_text()
    monkeypatch.setattr(pathlib.Path, "read_text",
                        lambda self, *a, **k: text + "\nfrom overlapsat.cli import main\n" if self == fake
                        else pathlib.Path.read_text.__wrapped__(self) if hasattr(pathlib.Path.read_text, "__wrapped__")
                        else open(self).read())
    assert any("graph.py" in c and "cli" in c for c in crossings())


def module_imports() -> dict[str, set[str]]:
    """Module -> the overlapsat modules it imports, lazy imports included."""
    out = {}
    for path in PKG.rglob("*.py"):
        name = ".".join(("overlapsat", *path.relative_to(PKG).with_suffix("").parts)).removesuffix(".__init__")
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("overlapsat"):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("overlapsat")}
        out[name] = deps
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle among modules once (a package importing its own submodules is not one: the package
    `overlapsat` re-exports, and a submodule's parent package is imported by Python itself)."""
    found, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if d not in graph or d == "overlapsat" or m.startswith(d + ".") or d == m:
                continue  # (a module's `__main__` block importing its own name: the worker entry point)
            if state.get(d) == 1:
                found.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return found


def test_no_import_cycles_between_modules():
    assert cycles(module_imports()) == []


def test_the_cycle_check_can_fail():
    assert cycles({"overlapsat.graph": {"overlapsat.io"}, "overlapsat.io": {"overlapsat.graph"}}) == [
        ["overlapsat.graph", "overlapsat.io", "overlapsat.graph"]]


def _imported_roots(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_library_imports_no_benchmark_or_test_and_the_benchmarks_no_test():
    repo = PKG.parent
    for path in PKG.rglob("*.py"):
        bad = {m for m in _imported_roots(path) if m.split(".")[0] in ("benchmarks", "tests")}
        assert not bad, f"{path}: {bad}"
    for path in (repo / "benchmarks").rglob("*.py"):
        bad = {m for m in _imported_roots(path) if m.split(".")[0] == "tests"}
        assert not bad, f"{path}: {bad}"


def test_the_gpu_harness_imports_only_the_library_its_trace_reader_and_torchtitans_models():
    gpu = PKG.parent / "benchmarks" / "gpu"
    for name in ("e2e_step.py", "run_files.py", "titan_models.py", "trace_stats.py"):
        own = {m for m in _imported_roots(gpu / name) if m.startswith("benchmarks")}
        assert own <= {"benchmarks.gpu.run_files", "benchmarks.gpu.titan_models", "benchmarks.gpu.trace_stats"}, \
            (name, own)
    for name in ("run_files.py", "titan_models.py"):  # what it leans on leans on nothing of the benchmarks,
        assert not {m for m in _imported_roots(gpu / name) if m.startswith("benchmarks")}, name
    # but the trace's figures on the trace reader
    assert {m for m in _imported_roots(gpu / "trace_stats.py") if m.startswith("benchmarks")} == \
        {"benchmarks.gpu.run_files"}


def test_no_solver_function_is_long_or_closes_over_mutable_state():
    """Issue 49: no function under overlapsat/solver/ is longer than 120 lines, and none rebinds a name of an
    enclosing function (`nonlocal`): a search is phases with typed statistics, not closures."""
    root = pathlib.Path(overlapsat.__file__).parent / "solver"
    long, closures = [], []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 120:
                long.append(f"{path.name}:{node.name}")
            if isinstance(node, ast.Nonlocal):
                closures.append(f"{path.name}:{node.lineno}")
    assert not long and not closures, (long, closures)
