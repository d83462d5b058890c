# Sourced by the device scripts: the wheels carried in .whl onto the path, NVLink multicast off, $OUT set.
# The wheels travel either as .whl/*.whl or, to fit the carry limit, unpacked into one .whl/site.tar.xz
# (benchmarks/results/gpu_runs.md, Setup).
if [ -f .whl/site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .whl/site.tar.xz || { echo "site unpack failed"; exit 1; }
  if ls .whl/*.whl >/dev/null 2>&1; then  # wheels beside the bundle (torchtitan's, pure Python): added to it
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
      >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
  fi
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
