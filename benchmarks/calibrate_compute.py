"""Measure bf16 GEMMs of transformer shapes and memory-bound kernels on one GPU.

    python benchmarks/calibrate_compute.py --out compute.json

Each figure is the mean of CUDA-event-timed calls queued behind a GPU sleep
(host launch overhead hidden), after warm-up, with FLOPs and bytes moved.
"""

from __future__ import annotations

import argparse
import datetime
import json

import torch


def bench(fn, iters: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(5e7))
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000 / iters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    # transformer shapes: tokens x hidden -> out (qkv 3h, proj h, up 4h, down from 4h)
    for tokens in (1024, 4096, 16384):
        for h in (1024, 2048, 4096, 8192):
            for name, k, n in (("qkv", h, 3 * h), ("proj", h, h), ("up", h, 4 * h), ("down", 4 * h, h)):
                x = torch.randn(tokens, k, device=dev, dtype=torch.bfloat16)
                w = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
                flops = 2.0 * tokens * k * n
                t = bench(lambda x=x, w=w: x @ w, max(5, min(200, int(2e13 / flops))))
                rows.append({"kind": "gemm", "name": name, "m": tokens, "k": k, "n": n, "flops": flops,
                             "bytes": 2.0 * (tokens * k + k * n + tokens * n), "us": t})
                print(json.dumps(rows[-1]), flush=True)
    for numel in (2**16, 2**20, 2**22, 2**24, 2**26, 2**28):
        x = torch.randn(numel, device=dev, dtype=torch.bfloat16)
        y = torch.randn(numel, device=dev, dtype=torch.bfloat16)
        for name, fn, nb in (("add", lambda x=x, y=y: x + y, 3 * 2 * numel),
                             ("gelu", lambda x=x: torch.nn.functional.gelu(x), 2 * 2 * numel),
                             ("layernorm", lambda x=x: torch.nn.functional.layer_norm(x.view(-1, 1024), (1024,)),
                              2 * 2 * numel),
                             ("softmax", lambda x=x: torch.softmax(x.view(-1, 1024), -1), 2 * 2 * numel)):
            t = bench(fn, max(5, min(500, int(2e10 / nb))))
            rows.append({"kind": "memory", "name": name, "numel": numel, "flops": 8.0 * numel, "bytes": float(nb),
                         "us": t})
            print(json.dumps(rows[-1]), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
            "device": torch.cuda.get_device_name(dev)}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "kernels": rows}, f, indent=1)


if __name__ == "__main__":
    main()
