#!/usr/bin/env bash
# llama.cpp's own tools on the same work as `appliance quantize`, for a peer check (not part of CI).
#
#   scripts/quantize_peer.sh SOURCE_F16.gguf CALIB_DIR OURS.gguf [LLAMA_BIN]
#
# Writes our calibration and held-out text (the same split `appliance quantize --calib CALIB_DIR`
# makes), then with llama.cpp's tools built from the vendored sources of llama-cpp-python
# (cmake -S vendor/llama.cpp -B build -DLLAMA_BUILD_TOOLS=ON -DLLAMA_CURL=OFF + the CPU flags of
# install.sh; cmake --build build --target llama-imatrix llama-quantize llama-perplexity):
#   1. llama-imatrix over the calibration text, llama-quantize Q4_K_M with the same tensor policy;
#   2. llama-quantize Q4_K_M with llama.cpp's defaults and no imatrix;
#   3. llama-perplexity --kl-divergence (full vocabulary) of OURS.gguf and of both peers against the source.
set -euo pipefail
SRC="${1:?usage: $0 SOURCE_F16.gguf CALIB_DIR OURS.gguf [LLAMA_BIN]}"; CALIB="${2:?}"; OURS="${3:?}"
BIN="${4:-build/bin}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mktemp -d)"
"$ROOT/.venv/bin/python" - "$CALIB" "$OUT" <<'PY'
import sys
from pathlib import Path
from appliance.quant import calib
texts, _ = calib.from_dir(Path(sys.argv[1]))
split = calib.split(texts, sys.argv[1])
out = Path(sys.argv[2])
general = calib.GENERAL_TEXT.read_text(encoding="utf-8")
(out / "calib.txt").write_text("\n\n".join(split.calibration)[:60000] + "\n\n" + general, encoding="utf-8")
(out / "held.txt").write_text("\n\n".join(split.held_out)[:30000], encoding="utf-8")
PY
cd "$OUT"
"$BIN/llama-imatrix" -m "$SRC" -f calib.txt -c 512 --chunks 28 -o peer.imatrix.gguf --no-ppl > imatrix.log 2>&1
"$BIN/llama-quantize" --imatrix peer.imatrix.gguf --output-tensor-type q8_0 --token-embedding-type q8_0 \
  --tensor-type attn_v=q5_k --tensor-type ffn_down=q5_k "$SRC" peer-imat.gguf Q4_K_M > quantize1.log 2>&1
"$BIN/llama-quantize" "$SRC" peer-plain.gguf Q4_K_M > quantize2.log 2>&1
"$BIN/llama-perplexity" -m "$SRC" -f held.txt -c 512 --chunks 8 --kl-divergence-base base.kld > base.log 2>&1
for m in "$OURS" peer-imat.gguf peer-plain.gguf; do
  echo "== $m"
  "$BIN/llama-perplexity" -m "$m" -f held.txt -c 512 --chunks 8 --kl-divergence-base base.kld --kl-divergence 2>&1 \
    | grep -E "Mean PPL\(Q\)/PPL\(base\)|Mean    KLD|99.0%   KLD|Same top p"
done
echo "work files: $OUT"
