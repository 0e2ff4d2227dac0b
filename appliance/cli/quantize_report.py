"""`appliance quantize --compare`: one table of types (with and without the imatrix) and a recommendation."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from rich.table import Table

from appliance.cli.common import console


def compare_types(bench_, types: list[str], use_imatrix: bool, keeps, mixed: bool, bound: float,
                  vram: str | None, bench: bool, as_json: bool) -> None:
    """Build, measure and delete every candidate; print the table and the smallest type within `bound`."""
    from appliance.quant.types import ftype_value

    for t in types:
        ftype_value(t)  # unknown names fail before any work
    device, where = _device(vram)
    wb = bench_.open()
    scratch = _scratch(bench_.settings.data_path / "models")
    rows = []
    try:
        for t in types:
            for imat in ((True, False) if use_imatrix else (False,)):
                path = scratch / f"{t.lower()}{'-imat' if imat else ''}.gguf"
                cand = wb.build(t, path, imat, keeps, mixed, bench)
                row = cand.to_dict()
                row["max_concurrency"] = _concurrency(cand, device)
                rows.append(row)
                path.unlink(missing_ok=True)
    finally:
        bench_.progress.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    ok = [r for r in rows if r["kld_mean"] <= bound]
    best = min(ok, key=lambda r: (r["bytes"], r["kld_mean"])) if ok else None
    result = {"source": str(bench_.source), "max_kld": bound, "device_bytes": device, "device": where,
              "rows": rows, "recommended": best and {"type": best["type"], "imatrix": best["imatrix"]},
              **wb.facts()}
    if as_json:
        print(json.dumps(result))
        return
    _print_table(result)


def _scratch(models: Path) -> Path:
    """A scratch folder next to the models (same disk: candidates of a 13B model are GBs each)."""
    models.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".compare-", dir=models))


def _device(vram: str | None) -> tuple[int, str]:
    from appliance.plan import detect_device_bytes, parse_size

    return (parse_size(vram), "given") if vram else detect_device_bytes()


def _concurrency(cand, device: int, context: int = 4096) -> int:
    """Sequences of `context` tokens that fit next to the weights (`appliance plan`'s ledger)."""
    from appliance.plan import Shape, plan

    return plan(Shape.of(cand.path.stem, cand.model), device, context, 1).max_concurrency


def _print_table(r: dict) -> None:
    table = Table("type", "imatrix", "MiB", "bits/w", "CPU repack %", "PPL", "ΔPPL %", "KLD mean", "KLD p99",
                  "top-1 %", "tok/s b1", "tok/s b16", f"conc @ {r['device_bytes'] / 2**30:.0f} GiB, 4k ctx",
                  title=f"{r['source']} (source PPL {r['rows'][0]['ppl_source']:.3f}) on "
                        f"{r['eval_tokens_scored']} held-out tokens of {r['calibration']}")
    for row in r["rows"]:
        fmt = "{:.1f}".format
        table.add_row(row["type"], "yes" if row["imatrix"] else "no", f"{row['bytes'] / 2**20:.1f}",
                      f"{row['bits_per_weight']:.2f}", f"{100 * row['cpu_repack_share']:.0f}",
                      f"{row['ppl']:.3f}", f"{row['delta_ppl_pct']:+.1f}",
                      f"{row['kld_mean']:.4f}", f"{row['kld_p99']:.3f}", f"{100 * row['top1_agreement']:.1f}",
                      fmt(row["tok_s_b1"]) if row["tok_s_b1"] else "-",
                      fmt(row["tok_s_b16"]) if row["tok_s_b16"] else "-", str(row["max_concurrency"]))
    console.print(table)
    best = r["recommended"]
    if best:
        console.print(f"recommended: [bold]{best['type']}[/]{' with --calib (imatrix)' if best['imatrix'] else ''}"
                      f" — the smallest file with mean KLD ≤ {r['max_kld']}")
    else:
        console.print(f"[yellow]no type stays within mean KLD ≤ {r['max_kld']}[/]; try wider types or --keep")
