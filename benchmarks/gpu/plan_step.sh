#!/usr/bin/env bash
# #32 on 2 or 4 GPUs (nvidia-h200-x2/-x4, or their H100 stand-ins), one device call per step, under 10 minutes:
#   bash benchmarks/gpu/plan_step.sh comparable|regather|fsdp4|tp
# comparable: the transport microbenchmark (benchmarks/gpu/transport.py), then the step without re-gather;
# regather: the step that gathers every weight again in backward; fsdp4 and tp: 4 GPUs (FSDP; 2-way TP x 2-way
# FSDP).
# Configurations (benchmarks/gpu/e2e_step.py): a, b_iter, c_bkt (torch's scheduler with its bucketing), c_lc
# (c_bkt with torch's copy-engine swap), tbb, tbb_torch (torch's manual_overlap_bucketing), d (overlapsat's order), p (overlapsat's plan), p_mem (p under a
# budget), p_ce (p with copy-engine all_gathers where the measured table prices them cheaper), p_co (p with
# coalesced buckets: one NCCL group call per bucket, no copies; decision 55). Pricing
# follows the card: h200 (calibrated) on H200s, h100_sxm (the analytical roofline) on H100s.
# Everything comes back as one archive, $OUT/<case>.tar.xz. Carry the wheels in .whl (benchmarks/gpu/device_env.sh). Environment: CONFIGS,
# LIMIT (seconds for the step), SOLVE_S (per graph), KEEP (configurations whose rank-0 trace comes back),
# ALL_RANKS=1 (every rank's trace of those), NO_TRANSPORT (comparable and tp without the transport run), STORE_FROM (an
# earlier run's store.tar.gz: its schedules applied as stored, none solved; run 87), TAG (the archive's name suffix).
# NCCL_* variables pass through to the ranks, and results.json records them (run 88: NCCL_MAX_CTAS).
set -u
. benchmarks/gpu/device_env.sh
case_=${1:-comparable}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
profile=h200; case "$gpu" in *H100*) profile=h100_sxm ;; esac
profile=${PROFILE:-$profile}  # PROFILE: a profile file, e.g. benchmarks/gpu/h100_sxm_host.json (run 64)
echo "gpu: $gpu ($(nvidia-smi -L | wc -l) cards), profile $profile, NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-default}"
work=$(mktemp -d)
start=$SECONDS
step() {  # DIR LIMIT [e2e_step options]
  local dir=$1 limit=$2; shift 2
  timeout "$limit" python3 benchmarks/gpu/e2e_step.py --out "$work/$dir" --profile "$profile" --steps 30 \
    --warmup 5 --prof-steps 4 --prof-warmup 1 --solve-s ${SOLVE_S:-15} --keep-traces ${KEEP:-} ${ALL_RANKS:+--trace-all-ranks} \
    ${STORE_FROM:+--store-from "$STORE_FROM"} "$@" 2>&1 \
    | grep -v -i "warn\|pre_bucket\|^ \|^\[rank" > "$work/log_$dir.txt"
  grep -E "^(a|b_iter|c|c_bkt|c_lc|tbb|tbb_torch|d|p|p_mem|p_ce|p_co) " "$work/log_$dir.txt" | cut -c1-160
}
case "$case_" in
comparable)
  [ -n "${NO_TRANSPORT:-}" ] || timeout 120 python3 benchmarks/gpu/transport.py --out "$work/transport" --world 2 2>&1 \
    | tail -3 | cut -c1-300
  step comparable $(( ${LIMIT:-570} - (SECONDS - start) )) --world 2 --configs ${CONFIGS:-p c_bkt d tbb a b_iter c_lc} ;;
regather)
  step regather ${LIMIT:-560} --world 2 --regather --configs ${CONFIGS:-p c_bkt d tbb a b_iter} ;;
fsdp4)  # 4 GPUs, FSDP over all four; p_mem: the plan with each graph's peak at most its captured order's
  step fsdp4 ${LIMIT:-560} --world 4 --memory-budget 1.0 --configs ${CONFIGS:-p p_mem c_bkt tbb d b_iter a} ;;
tp)  # 4 GPUs, 2-way TP x 2-way FSDP, one issue order over both groups; first the transport again on 2 of them
  [ -n "${NO_TRANSPORT:-}" ] || timeout 120 python3 benchmarks/gpu/transport.py --out "$work/transport" --world 2 2>&1 \
    | tail -3 | cut -c1-300
  step tp $(( ${LIMIT:-560} - (SECONDS - start) )) --world 4 --tp 2 --collective-order chain \
    --configs ${CONFIGS:-p c_bkt tbb d b_iter} ;;
esac
echo "total ${SECONDS}s"
tar -C "$work" -cJf "$OUT/$case_${TAG:-}.tar.xz" .
