#!/usr/bin/env bash
# The device checks of issue 36, as one script for a lent CUDA machine (no network there).
#
# Here, once, the wheels the machine lacks (shared/gpu/README.md), into a git-ignored folder:
#   pip download -d .gpu-wheels --no-deps --only-binary=:all: --python-version 312 \
#       --platform manylinux_2_17_x86_64 xxhash safetensors ml_dtypes
#   pip download -d .gpu-wheels --no-deps filelock pytest-html pytest-metadata \
#       array-api-compat hypothesis sortedcontainers attrs
# There, with the device tool: carry [".gpu-wheels"], command "bash bench/gpu_issue36.sh".
# It prints the card, the versions, the torch path's parity tests on the GPU and the device
# benchmark; copies of both go to $OUT when the tool sets it.
set -uo pipefail
out="${OUT:-/tmp/gpu36}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/card.txt"
if [ -d .gpu-wheels ]; then
    python3 -m pip install -q --no-index --no-deps --find-links .gpu-wheels --target /tmp/site \
        xxhash safetensors ml_dtypes filelock pytest-html pytest-metadata array-api-compat \
        hypothesis sortedcontainers attrs
    export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
python3 -c "import torch, numpy, array_api_compat; print('torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name(0), 'numpy', numpy.__version__, \
'array-api-compat', array_api_compat.__version__)" | tee "$out/versions.txt"
# the torch path on the GPU gives the host's verdicts and reports; a torch runner's outputs
# and cudaMalloc'd memory handed to torch (TensorRT's outputs) stay there (-m cuda)
timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_engine_torch_path.py \
    tests/test_device_outputs.py tests/test_trt_torch_outputs.py \
    2>&1 | tail -15 | tee "$out/cuda_tests.txt"
timeout 300 python3 bench/bench_device.py --sizes 16M,64M --rounds 3 2>&1 | tee "$out/bench_device.txt"
# the order statistics' cap (TUNING.torch_kept, 4M) at 64M: none kept (always read again), all kept
for kept in 0 1000000000; do
    timeout 150 python3 bench/bench_device.py --sizes 64M --rounds 3 --torch-kept "$kept" \
        2>&1 | tee "$out/bench_device_kept_$kept.txt"
done
