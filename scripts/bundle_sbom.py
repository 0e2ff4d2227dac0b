#!/usr/bin/env python
"""The bundle's CycloneDX SBOM: every package of the wheelhouse (from cyclonedx-bom), with each
file's sha256, plus the pre-built llama.cpp wheels and the GGUF models it carries.

    python scripts/bundle_sbom.py BUNDLE_DIR PATH/TO/cyclonedx-py      (called by make-bundle.sh)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from appliance.models.registry import sha256_file  # noqa: E402


def _name_version(path: Path) -> tuple[str, str]:
    if path.name.endswith(".whl"):
        name, version, *_ = parse_wheel_filename(path.name)
    else:
        name, version = parse_sdist_filename(path.name)
    return canonicalize_name(name), str(version)


def main(bundle: Path, cyclonedx: str) -> int:
    files = {_name_version(p): p for p in sorted((bundle / "wheelhouse").iterdir())}
    reqs = bundle / "requirements.txt"  # the exact set the target installs, for auditors too
    reqs.write_text("".join(f"{n}=={v}\n" for n, v in sorted(files)))
    out = bundle / "sbom.cdx.json"
    done = subprocess.run([cyclonedx, "requirements", str(reqs), "--of", "JSON", "-o", str(out),
                           "--pyproject", str(bundle / "appliance" / "pyproject.toml")], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cyclonedx-py failed: {done.stderr[-2000:]}")
    sbom = json.loads(out.read_text())
    for comp in sbom.get("components", []):
        path = files.get((canonicalize_name(comp.get("name", "")), comp.get("version", "")))
        if path is not None:
            comp["hashes"] = [{"alg": "SHA-256", "content": sha256_file(path)}]
            comp.setdefault("properties", []).append({"name": "appliance:file", "value": f"wheelhouse/{path.name}"})
    extra = [("library", p, "llama-wheels") for p in sorted((bundle / "llama-wheels").rglob("*.whl"))]
    extra += [("machine-learning-model", p, "models") for p in sorted((bundle / "models").glob("*"))]
    for kind, path, folder in extra:
        sbom.setdefault("components", []).append({
            "type": kind, "name": path.name, "bom-ref": f"{folder}/{path.relative_to(bundle / folder)}",
            "hashes": [{"alg": "SHA-256", "content": sha256_file(path)}],
            "properties": [{"name": "appliance:file", "value": str(path.relative_to(bundle))}]})
    out.write_text(json.dumps(sbom, indent=1))
    print(f"SBOM: {len(sbom.get('components', []))} components")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
