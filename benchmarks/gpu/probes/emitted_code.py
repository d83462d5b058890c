"""What the reading after fusion misses, read off the code Inductor emits (CPU, fake process group of 2 ranks).

    python benchmarks/gpu/probes/emitted_code.py > benchmarks/results/emitted_code_cpu_<date>.md

The small re-gather step (`allocator.step`), its plan under the default budget solved as `allocator.py` solves it,
compiled with overlapsat's check after fusion. For the backward graph, three readings of the same compile:
- after fusion: Inductor's nodes by MODEL.md's rule (`e2e_step.after_fusion`, what the check after fusion reads);
- the emitted code: the wrapper's `call` walked statement by statement (each `empty_strided_cpu`, collective or
  extern output sized by its assert, each alias and `# reuse`, each `del`; a storage freed when no name holds it;
  the sharded parameters held by the module), once with the incoming gradient held to the end (decision 93) and
  once freed where the code deletes it;
- the CPU allocator's own events (`torch.profiler`), over what it held when the step began.
It lists the buffers the reading after fusion allocates that the code never names (Inductor removed them inside a
fused kernel) and the code's reuse lines (an output written into a buffer whose last reader it is, or a freed
buffer kept for the next one of its size).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

ITEM = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2, "torch.int64": 8, "torch.int32": 4,
        "torch.bool": 1, "torch.uint8": 1}
SHAPE = r"(\(.*?\)), (\(.*?\))"


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.strip("()").split(",") if v.strip())


def _bytes(shape: str, stride: str, item: int) -> int:
    size, st = _ints(shape), _ints(stride)
    return 0 if any(s == 0 for s in size) else item * (1 + sum((s - 1) * t for s, t in zip(size, st)))


def walk_call(code: str, held: tuple[str, ...]) -> tuple[int, str, list[str]]:
    """The most the wrapper's `call` holds beyond the parameters (held before the step began), with the inputs
    whose names start with `held` kept to the end; the statement where it does, and its reuse lines. Sizes:
    `rand_strided` for inputs, `empty_strided_cpu`, and an output's `assert_size_stride` (float32) for
    collectives and extern kernels."""
    body = code[code.index("def call(self, args):"):]
    body = body[:body.index("\n        return ")]
    inputs_size = {m.group(1): _bytes(m.group(2), m.group(3), ITEM[m.group(4)]) for m in re.finditer(
        r"(\w+) = rand_strided\(" + SHAPE + r", device='cpu', dtype=(torch\.\w+)\)", code)}
    lines = [x.strip() for x in body.splitlines()[1:] if x.strip() and not x.strip().startswith("#")]
    asserted = {m.group(1): _bytes(m.group(2), m.group(3), 4) for m in
                (re.match(r"assert_size_stride\((\w+), " + SHAPE, x) for x in lines) if m}
    items: dict[str, list[str]] = {}  # a returned tuple's items, by the names the code reads them into
    for m in (re.match(r"(\w+) = (\w+)\[\d+\]$", x) for x in lines):
        if m:
            items.setdefault(m.group(2), []).append(m.group(1))
    ref: dict[str, int] = {}
    size: dict[int, int] = {}
    count: dict[int, int] = {}

    def new(name: str, nbytes: int) -> None:
        sid = len(size) + 1
        size[sid], count[sid], ref[name] = nbytes, 1, sid

    members: dict[str, list[int]] = {}  # a tuple an op returned: the storages of the items read out of it
    flat: set[str] = set()  # overlapsat's bucket copy-outs: their items are views of one buffer (decision 81)

    def drop(name: str) -> None:
        if name in ref:
            count[ref.pop(name)] -= 1
        for sid in members.pop(name, ()):  # the tuple held its items
            count[sid] -= 1

    names = [v.strip() for v in lines[0].split("=")[0].split(",") if v.strip()]
    for name in names:
        new(name, inputs_size.get(name, 0))
        if name.startswith(held):
            count[ref[name]] += 1  # held by the module (parameters) or by autograd
    base = sum(inputs_size.get(n, 0) for n in names if n.startswith("primals"))  # held before the step began
    peak, where, reuses = 0, "", []
    for line in lines[1:]:
        if line.startswith("assert_"):
            continue
        if "# reuse" in line:
            reuses.append(line)
        for part in (p.split("  #")[0].strip() for p in line.split(";")):
            if m := re.match(r"del (\w+)$", part):
                drop(m.group(1))
            elif m := re.match(r"(\w+) = empty_strided_cpu\(" + SHAPE + r", (torch\.\w+)\)", part):
                new(m.group(1), _bytes(m.group(2), m.group(3), ITEM[m.group(4)]))
            elif (m := re.match(r"(\w+) = reinterpret_tensor\((\w+),", part) or re.match(r"(\w+) = (\w+)$", part)) \
                    and m.group(2) in ref:
                drop(m.group(1))
                ref[m.group(1)] = ref[m.group(2)]
                count[ref[m.group(1)]] += 1
            elif (m := re.match(r"(\w+) = (\w+)\[\d+\]$", part)) and m.group(2) in flat:
                sid = ref[m.group(2)]  # an item of overlapsat's copy-out: a view of its one buffer
                ref[m.group(1)] = sid
                count[sid] += 1
            elif m := re.match(r"(\w+) = (\w+)\[\d+\]$", part):
                new(m.group(1), asserted.get(m.group(1), 0))
                if m.group(2) in ref:  # an item of a tuple, which holds it until the tuple goes
                    count[ref[m.group(1)]] += 1
                    members.setdefault(m.group(2), []).append(ref[m.group(1)])
            elif m := re.match(r"(\w+) = (torch\.ops\.|extern_kernels\.)", part):
                if part.startswith(f"{m.group(1)} = torch.ops.overlapsat.bucket_copy_out"):
                    flat.add(m.group(1))  # its buffer holds every item, from the op on
                    new(m.group(1), sum(asserted.get(item, 0) for item in items.get(m.group(1), ())))
                else:
                    new(m.group(1), asserted.get(m.group(1), 0))
        now = sum(size[s] for s in size if count[s] > 0) - base
        if now > peak:
            peak, where = now, line
    return peak, where, reuses


def read_compile(f, model, x) -> tuple[list, list[str], list[int], str]:
    """Run one step of `f` (`model` compiled as installed, not run yet): (after-fusion sink, the emitted code of
    each graph, the CPU allocator's [forward, backward] peaks, the folder of the graphs read after fusion)."""
    from torch._inductor.utils import run_and_get_code

    from benchmarks.gpu.probes.allocator import allocator_peaks, reading_after_fusion

    fused: list = []
    saved = tempfile.mkdtemp()
    with reading_after_fusion(fused, saved):
        _, codes = run_and_get_code(lambda: f(x).sum().backward())
    for p in model.parameters():
        p.grad = None
    return fused, codes, allocator_peaks(f, model, x), saved


def main() -> None:
    import torch
    import torch._inductor.config as icfg

    from benchmarks.gpu.probes.allocator import WORK, ours, step
    from overlapsat.io import load_graph

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="osat_emitted_")
    icfg.force_disable_caches = True
    model, x = step()
    runs = [(name, read_compile(f, model, x)) for name, f, _, _ in ours(model, rounds=False)]
    print(f"Measured {torch.__version__}, CPU, fake process group of 2 ranks; the small re-gather step, float32; "
          f"plans solved at `free` on a work limit of {WORK} (one of 1.0) as `allocator.py` solves them, each "
          f"compiled once from the capture's records (its first compile: no second solve).\n")
    print("| configuration | graph | allocator B | after fusion (error) | emitted code, gradient freed (error) | "
          "emitted code, gradient held (error) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, (fused, codes, real, _saved) in runs:
        for i, graph in enumerate(("forward", "backward")):
            freed, kept = walk_call(codes[i], ("primals",))[0], walk_call(codes[i], ("primals", "tangents"))[0]
            cells = [f"{v:,} ({v - real[i]:+,})" for v in (fused[i][1], freed, kept)]
            print(f"| {name} | {graph} | {real[i]:,} | " + " | ".join(cells) + " |")
    name, (fused, codes, real, saved) = runs[1]  # the plan under the default budget, read closely
    backward = codes[1]
    colls, reading = fused[1]
    g = load_graph(os.path.join(saved, f"after_fusion_{colls}.graph.json"))
    kept, freed = walk_call(backward, ("primals", "tangents")), walk_call(backward, ("primals",))
    unnamed = [b for b in g.buffers if b.producer is not None and b.size_alloc > 0
               and not re.search(rf"\b{b.name}\b", backward)]
    print(f"\n## {name}: the backward graph ({colls} collectives)\n")
    print("| reading | peak B | against the allocator |")
    print("| --- | ---: | ---: |")
    for label, value in (("after fusion (MODEL.md's rule on Inductor's nodes)", reading),
                         ("emitted code, incoming gradient held to the end", kept[0]),
                         ("emitted code, incoming gradient freed where the code deletes it", freed[0]),
                         ("CPU allocator", real[1])):
        print(f"| {label} | {value:,} | {value - real[1]:+,} |")
    print(f"\nThe emitted code peaks at `{kept[1][:90]}` (gradient held) and at `{freed[1][:90]}` (freed).\n")
    print(f"Buffers the reading after fusion allocates that the emitted code never names (removed inside a fused "
          f"kernel): {len(unnamed)}, {sum(b.size_alloc for b in unnamed):,} B in all; the largest: "
          + ", ".join(f"`{b.name}` of `{b.producer}` ({b.size_alloc:,} B)"
                      for b in sorted(unnamed, key=lambda b: -b.size_alloc)[:4]) + ".\n")
    print(f"Reuse lines in the emitted code: {len(kept[2])}; the first: "
          + "; ".join(f"`{r.split('  #')[0][:80]}`" for r in kept[2][:3]) + ".")


if __name__ == "__main__":
    main()
