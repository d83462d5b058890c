#!/usr/bin/env bash
# Issue "plans within the memory a user has": the plan at equal memory on a shape not run before (10 layers,
# dim 2560, 20 heads, ffn 6912, sequence 3072, bf16), on 2 GPUs, with or without the backward re-gather:
#   bash benchmarks/gpu/eq_shape.sh [regather]
# First `a` (no reordering, run first) and `c_bkt` (torch bucketed), each in a process of its own (e2e_step.py
# runs every configuration so); WORLD=4 runs FSDP over 4 GPUs, WORLD=4 TP=2 2-way tensor parallelism x 2-way
# FSDP (the folder's name says which); then the ratio of c_bkt's measured peak to a's becomes p_mem's budget (the plan
# under torch bucketed's measured peak: a ratio of each graph's captured peak, which leaves the plan less room
# than torch bucketed had, since the process's peak also holds what no graph changes), and tbb_torch, p (the
# default budget), p_mem and p_free run (SECOND="tbb_torch p_co p_co_mem p_co_free": the same plans with
# coalesced buckets, decision 55); EXTRA: more e2e_step options for both calls (e.g. --resolve-rounds 2 --fx-inline).
# TAG names the folder (another SHAPE, e.g. the 8-layer step). One results.json comes back: $OUT/eqshape[_regather]/results.json.
set -u
# DRY=1 SHAPE="..." (e.g. --device cpu and a small model): the same flow on this machine, without the wheels
[ -n "${DRY:-}" ] && OUT=${OUT:-$(mktemp -d)} || . benchmarks/gpu/device_env.sh
rg=${1:-}
world=${WORLD:-2} tp=${TP:-1}
tag=${TAG:-eqshape$( [ "$world" = 2 ] || echo "_w$world")$( [ "$tp" = 1 ] || echo "_tp$tp")${rg:+_regather}}
shape="--world $world --tp $tp ${SHAPE:---layers 10 --dim 2560 --heads 20 --ffn 6912 --seq 3072} ${rg:+--regather}"
common="--profile h200 --steps ${STEPS:-30} --warmup 5 --prof-steps 4 --prof-warmup 1 --solve-s ${SOLVE_S:-12} --keep-traces ${EXTRA:-}"
mkdir -p "$OUT/$tag"
run() {  # NAME LIMIT [options]
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 benchmarks/gpu/e2e_step.py $shape $common --out "$OUT/$tag/$name" "$@" 2>&1 \
    | grep -v -i "warn\|pre_bucket\|^ \|^\[rank" > "$OUT/$tag/log_$name.txt"
  grep -E "^(a|c_bkt|tbb_torch|p|p_mem|p_free|p_co|p_co_mem|p_co_free) " "$OUT/$tag/log_$name.txt" | cut -c1-140
}
run first ${FIRST_S:-220} --configs a c_bkt
ratio=$(python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))['configs']
peak = lambda k: max(r.get('peak_memory_bytes') or 0 for r in c[k]['ranks'])
print(f'{peak(\"c_bkt\") / peak(\"a\"):.4f}' if peak('a') else '1.0000')  # (no CUDA peaks: a dry run)
" "$OUT/$tag/first/results.json") || { echo "no peaks"; exit 1; }
echo "p_mem budget: ${ratio} x (c_bkt's measured peak over a's)"
run second $(( ${LIMIT:-570} - SECONDS )) --memory-budget "$ratio" --configs ${SECOND:-tbb_torch p p_mem p_free}
python3 - "$OUT/$tag" "$ratio" <<'EOF'
import json, os, sys
folder, ratio = sys.argv[1], float(sys.argv[2])
first = json.load(open(os.path.join(folder, "first", "results.json")))
second_path = os.path.join(folder, "second", "results.json")
second = json.load(open(second_path)) if os.path.exists(second_path) else {"configs": {}}
out = {**second, "meta": {**first["meta"], **second.get("meta", {}), "budget_from": "c_bkt's measured peak over a's",
                          "first_args": first["meta"]["args"]}}
out["meta"].setdefault("args", first["meta"]["args"])
out["meta"]["args"] = {**out["meta"]["args"], "memory_budget": ratio}
out["configs"] = {**first["configs"], **second["configs"]}
json.dump(out, open(os.path.join(folder, "results.json"), "w"), indent=1)
print("merged:", list(out["configs"]))
EOF
