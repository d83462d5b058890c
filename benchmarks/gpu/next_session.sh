#!/usr/bin/env bash
# What #13 still needs from the GPUs (benchmarks/results/gpu_runs.md, "Not done" and "Fixed before the next runs"), as
# device calls of under 10 minutes each. Carry the wheels in .whl: to fit the 64 MiB carry limit, unpacked
# into one archive, which benchmarks/gpu/device_env.sh unpacks on the device:
#   mkdir site && for w in .whl/*.whl; do unzip -q -o "$w" -d site; done
#   tar -C site -cf - . | xz -9e -T2 > .whl/site.tar.xz   (then move the .whl files out of .whl)
# The tracked results and .whl together come within about 0.1 MB of that limit (after run 49): move
# benchmarks/results/gpu_2026-11-22 out of the tree for each call (no case reads it) and put it back after.
# After each call, on the CPU: python benchmarks/gpu/probes/window_check.py DIR for every results folder it brought back
# (the window rule fixed after run 50, benchmarks/results/gpu_runs.md "Window check").
set -u
. benchmarks/gpu/device_env.sh
mem_run() {  # DIR LIMIT [e2e_step options]: the re-gather step at `free` under the budget 1.3, (d_mem) only, with
  # the allocator's history of one step on rank 0; the log in DIR/log.txt
  local dir=$1 limit=$2; shift 2
  mkdir -p "$dir"
  timeout "$limit" python3 benchmarks/gpu/e2e_step.py --world 2 --regather --collective-order free --memory-budget 1.3 \
    --pin compute --warmup 3 --steps 20 --prof-steps 3 --prof-warmup 1 --configs d_mem --keep-traces --snapshot \
    --out "$dir" "$@" 2>&1 | grep -v -i "warn\|pre_bucket" > "$dir/log.txt"
  tail -2 "$dir/log.txt" | cut -c1-300
}
case "${1:-tp}" in
tp)  # 4 H200s (nvidia-h200-x4): the tensor-parallel step (2-way TP x 2-way FSDP, one issue order over both
     # groups; d_tie breaks the plain model's ties by the contention model). Runs on 4 gloo ranks with eager's
     # loss; never on a GPU: no 4-GPU machine was lent in nine sessions.
  timeout 540 python3 benchmarks/gpu/e2e_step.py --world 4 --tp 2 --collective-order chain --out "$OUT/tp" \
    --steps 30 --prof-steps 5 --configs d d_tie c b_three b_iter 2>&1 | grep -v -i "warn\|pre_bucket" \
    | tee "$OUT/log_tp.txt" | cut -c1-200 | grep -v "^ " | tail -6 ;;
tp2)  # 2 H200s (nvidia-h200-x2), since no 4-GPU machine is lent: 2-way Megatron tensor parallelism alone (no
     # FSDP dimension), sequence 4096, so each all_reduce carries 32 MiB; checked on 2 gloo ranks on the CPU
     # (2026-11-23). One call: (d) and the torch orders, then a second pass of (d) and (b) as time allows.
  timeout 540 python3 benchmarks/gpu/e2e_step.py --world 2 --tp 2 --seq 4096 --collective-order chain \
    --out "$OUT/tp2" --steps 30 --prof-steps 5 --configs d b_iter c a 2>&1 | grep -v -i "warn\|pre_bucket" \
    | tee "$OUT/log_tp2.txt" | cut -c1-200 | grep -v "^ " | tail -6 ;;
memory)  # 2 H200s (nvidia-h200-x2): run 33's overshoot (5.41 GB against 5.17 allowed and predicted at `free`
     # under the budget 1.3), with the allocator's requested and allocated peaks and the forward graph's peak
     # recorded (e2e_step.memory_phases); then the same at pin="all", which stops fusion across the order
  FIRST="d_mem d b_iter" SECOND="" FIRST_S=330 EXTRA="--collective-order free --memory-budget 1.3 --solve-s 60" \
    bash benchmarks/gpu/regather_x2.sh
  mv "$OUT/pass1" "$OUT/pin_compute"; mv "$OUT/log_pass1.txt" "$OUT/log_pin_compute.txt"
  FIRST="d_mem" SECOND="" FIRST_S=200 EXTRA="--collective-order free --memory-budget 1.3 --solve-s 60 --pin all" \
    bash benchmarks/gpu/regather_x2.sh ;;
snapshot)  # 2 H200s (about 5 minutes): run 33's budgeted `free` orders again, applied from its store without
     # solving, with the after-fusion check that no longer leaves planning info behind (runs 34-38 found that it
     # changed Inductor's frees), and the allocator's history of one step on every rank (rank 0 keeps it).
     # A call returns at most 8 files: everything travels as one archive. Analysed offline:
     # benchmarks/gpu/probes/memory_snapshot.py (benchmarks/results/gpu_runs.md, "Fixed before the next runs, after runs 34-38")
  # Then the same with Inductor's buffer reuse off (the CPU check in benchmarks/gpu/probes/code_memory.py).
  R=benchmarks/results/gpu_2026-11-23
  work=$(mktemp -d)
  for job in "reuse" "no_reuse --no-buffer-reuse"; do
    set -- $job
    mem_run "$work/$1" 240 --store-from "$R/run33_regather_free_mem/store.tar.gz" ${2:-}
  done
  tar -C "$work" -cJf "$OUT/snapshot_runs.tar.xz" reuse no_reuse ;;
informed)  # 2 H200s (about 3 minutes), after run 39 found the check never installed on torch 2.11: run 33's
     # budgeted `free` orders from its store with the library's informed reuse gate, the allocator's history of
     # one step on rank 0; beside it, on the CPU, benchmarks/gpu/probes/reuse_probe.py on this torch
  R=benchmarks/results/gpu_2026-11-23
  work=$(mktemp -d)
  timeout 300 python3 benchmarks/gpu/probes/reuse_probe.py > "$work/probe.txt" 2>&1 &
  mem_run "$work/reuse" 240 --store-from "$R/run33_regather_free_mem/store.tar.gz"
  wait; grep -v -i "warn\|context_fn\|in-place\|\[0/0\] $" "$work/probe.txt" | tail -5
  tar -C "$work" -cJf "$OUT/informed_run.tar.xz" reuse probe.txt ;;
workspace)  # 2 H200s (about 4 minutes), after run 40: the re-gather step at `free` under the budget 1.3, solved
     # afresh (60 s per graph) now that the FX importer counts cuDNN attention backward's workspace
     # (fx.kernel_workspace); the allocator's history of one step on rank 0 (benchmarks/results/gpu_runs.md, "Fixed before
     # run 42")
  work=$(mktemp -d)
  mem_run "$work/ws" 500 --solve-s 60
  tar -C "$work" -cJf "$OUT/workspace_run.tar.xz" ws ;;
step_free)  # 2 H200s (about 7 minutes): the re-gather step at `free`, unbudgeted, solved afresh (20 s per graph),
     # against torch's iterative pair and the FX-level scheduler, now that the informed reuse gate runs on the
     # GPU's torch (decision 22's amendment) and the importer counts tangents and workspaces (decision 23)
  FIRST="d b_iter c" SECOND="d b_iter" FIRST_S=420 EXTRA="--collective-order free" bash benchmarks/gpu/regather_x2.sh
  cd "$OUT" && tar -cJf step_free.tar.xz pass1 pass2 log_pass1.txt log_pass2.txt 2>/dev/null \
    && rm -rf pass1 pass2 log_pass1.txt log_pass2.txt ;;
hard_budget)  # 2 H200s (about 4 minutes), after run 44: the same as `workspace`, with install_fx(buffer_reuse=False)
     # (decisions.md 25); the rule: benchmarks/results/gpu_runs.md, "Not done", the memory overshoot at `free`
  work=$(mktemp -d)
  mem_run "$work/hard" 500 --solve-s 60 --no-buffer-reuse
  tar -C "$work" -cJf "$OUT/hard_budget_run.tar.xz" hard ;;
reuse_ab)  # 2 H200s (about 6 minutes), after run 45 (buffer_reuse=False: within the budget, step 3.3 % slower
     # than run 44, whose order differed in 12 of 1,495 places): run 45's stored orders applied without solving,
     # Inductor's buffer reuse on and off alternated twice (ABAB), 60 timed steps each, to tell the option's cost
     # from the run-to-run spread (20 steps of run 44 ranged 47.7-52.8 ms)
  R=benchmarks/results/gpu_2026-11-23/run45_regather_free_mem_no_buffer_reuse
  work=$(mktemp -d)
  for job in "reuse1" "no_reuse1 --no-buffer-reuse" "reuse2" "no_reuse2 --no-buffer-reuse"; do
    set -- $job
    mem_run "$work/$1" 130 --store-from "$R/store.tar.gz" --steps 60 ${2:-}
    rm -rf "$work/$1"/trace_* "$work/$1"/snapshot_* "$work/$1"/after_fusion_*
  done
  tar -C "$work" -cJf "$OUT/reuse_ab.tar.xz" reuse1 no_reuse1 reuse2 no_reuse2 ;;
comparable)  # 2 H200s (about 6 minutes): the comparable step (no re-gather, `group`) with the library as it now
     # is (the informed reuse gate installed on torch 2.11, tangents and workspaces counted), run 32's command,
     # then the same three configurations in reverse order
  for pass in "p1 d b_iter c" "p2 c b_iter d"; do
    set -- $pass; dir=$1; shift
    timeout 260 python3 benchmarks/gpu/e2e_step.py --world 2 --out "$OUT/$dir" --steps 50 --prof-steps 10 \
      --prof-warmup 1 --configs "$@" 2>&1 | grep -v -i "warn\|pre_bucket" > "$OUT/log_$dir.txt"
    grep "step_ms_median" "$OUT/log_$dir.txt" | cut -c1-60
  done ;;
channels)  # 2 H200s (about 6 minutes), after run 47: the comparable step with NCCL limited to fewer channels
     # (CTAs, so SMs: 24 by default here), a setting every configuration gets, not an order; not counted toward
     # the 5 % target (benchmarks/results/gpu_runs.md, "Run 48, fixed before it")
  for job in "ch12 12 d c b_iter" "ch16 16 d c"; do
    set -- $job; dir=$1; n=$2; shift 2
    NCCL_MAX_NCHANNELS=$n timeout 250 python3 benchmarks/gpu/e2e_step.py --world 2 --out "$OUT/$dir" --steps 50 \
      --prof-steps 10 --prof-warmup 1 --configs "$@" 2>&1 | grep -v -i "warn\|pre_bucket" > "$OUT/log_$dir.txt"
    grep "step_ms_median" "$OUT/log_$dir.txt" | cut -c1-60
  done ;;
kern)  # 2 H200s (about 7 minutes), after run 48: the comparable step, (d) against (d_kern), its order polished
     # under GEMMs priced by size (e2e_step.STEP_GEMMS); the rule: benchmarks/results/gpu_runs.md, "Run 49, fixed before it"
  for job in "k1 d d_kern c b_iter" "k2 c d_kern d"; do
    set -- $job; dir=$1; shift
    timeout 250 python3 benchmarks/gpu/e2e_step.py --world 2 --out "$OUT/$dir" --steps 50 --prof-steps 10 \
      --prof-warmup 1 --keep-traces d d_kern --configs "$@" 2>&1 | grep -v -i "warn\|pre_bucket" > "$OUT/log_$dir.txt"
    grep "step_ms_median" "$OUT/log_$dir.txt" | cut -c1-60
  done
  cd "$OUT" && tar -cJf kern.tar.xz k1 k2 log_k1.txt log_k2.txt && rm -rf k1 k2 log_k1.txt log_k2.txt ;;
carveout)  # 2 H200s (about 7 minutes), after run 49: the comparable step with every matmul through cuBLASLt,
     # first as it plans, then with an SM carveout of 24 (NCCL's CTAs), so that a GEMM that fills the SMs in
     # one wave no longer loses one beside NCCL; the rule: benchmarks/results/gpu_runs.md, "Fixed for the next runs".
     # Run 50 (one H200, NCCL-shaped occupier) predicts it slower: take it last ("Run 50")
  for job in "lt --blas-lt" "lt_carve --blas-lt --sm-carveout 24"; do
    set -- $job; dir=$1; shift
    timeout 250 python3 benchmarks/gpu/e2e_step.py --world 2 --out "$OUT/$dir" --steps 50 --prof-steps 10 \
      --prof-warmup 1 "$@" --configs d c 2>&1 | grep -v -i "warn\|pre_bucket" > "$OUT/log_$dir.txt"
    grep "step_ms_median" "$OUT/log_$dir.txt" | cut -c1-60
  done ;;
esac
