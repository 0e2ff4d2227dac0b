"""`appliance quantize`: make a 4-bit (or any) GGUF from an F16/BF16/Q8_0 one, calibrated on the team's
documents, measured on held-out text, and registered only if it passes the quality gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from appliance.cli.common import ConfigOpt, JsonOpt, console, err_console, load_cli_settings


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""
    app.command("quantize")(quantize_command)


def quantize_command(
    source: Annotated[str, typer.Argument(help="Source GGUF (F16/BF16/Q8_0): a path or a registry name.")],
    qtype: Annotated[str, typer.Option("--type", help="Target type, e.g. Q4_K_M, Q5_K_M, Q4_0, Q8_0.")] = "Q4_K_M",
    calib: Annotated[Path | None, typer.Option(help="Calibrate on the documents in this folder.")] = None,
    calib_kb: Annotated[bool, typer.Option("--calib-kb", help="Calibrate on the indexed knowledge base "
                                           "(the default when it holds documents and no --calib is given).")] = False,
    use_imatrix: Annotated[bool, typer.Option("--imatrix/--no-imatrix", help="Use an importance matrix from "
                                              "the calibration text.")] = True,
    keep: Annotated[list[str] | None, typer.Option(help="PATTERN=TYPE: tensors matching the regex get TYPE "
                                                   "(before the default policy), e.g. ffn_down=Q6_K.")] = None,
    mixed: Annotated[bool, typer.Option("--mixed/--no-mixed", help="Keep output head and embeddings at Q8_0 "
                                        "and attn_v/ffn_down one step wider.")] = True,
    out: Annotated[Path | None, typer.Option(help="Output file (default: <data>/models/<source>-<type>.gguf).")] = None,
    name: Annotated[str | None, typer.Option(help="Registry name (default: the output file's stem).")] = None,
    max_kld: Annotated[float | None, typer.Option(help="Quality bound: largest mean KLD (default: "
                                                  "quantize.max_kld).")] = None,
    force: Annotated[bool, typer.Option(help="Register even if the quality gate fails.")] = False,
    allow_requantize: Annotated[bool, typer.Option(help="Accept an already-quantized source.")] = False,
    compare: Annotated[str | None, typer.Option(help="Compare types instead, e.g. Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0 "
                                                "(each with and without the imatrix); registers nothing.")] = None,
    vram: Annotated[str | None, typer.Option(help="--compare: device memory for the concurrency column "
                                             "(default: detected).")] = None,
    bench: Annotated[bool, typer.Option("--bench/--no-bench", help="Measure decode tok/s at batch 1 and 16.")] = True,
    diagnose: Annotated[bool, typer.Option("--diagnose/--no-diagnose", help="On a failed gate, try each tensor "
                                           "group at Q8_0 to say which to keep higher.")] = True,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Quantize a model with an importance matrix from your documents, check it, and register it."""
    from appliance.quant.types import parse_keep

    settings = load_cli_settings(config)
    keeps = parse_keep(keep or [])
    bound = max_kld if max_kld is not None else settings.quantize.max_kld
    bench_ = _Bench(settings, source, calib, calib_kb, allow_requantize, as_json)
    if compare:
        from appliance.cli.quantize_report import compare_types

        compare_types(bench_, [t.strip() for t in compare.split(",") if t.strip()], use_imatrix, keeps,
                      mixed, bound, vram, bench, as_json)
        return
    _one(bench_, qtype, use_imatrix, keeps, mixed, out, name, bound, force, bench, diagnose, as_json)


class _Bench:
    """Resolves the source and the text, then opens the workbench with a progress bar."""

    def __init__(self, settings, source: str, calib: Path | None, calib_kb: bool, allow_requantize: bool,
                 quiet: bool) -> None:
        from appliance.models.registry import ModelRegistry

        self.settings, self.quiet = settings, quiet
        self.registry = ModelRegistry(settings.data_path)
        entry = self.registry.resolve(source)
        self.source, self.source_name = Path(entry.path), entry.name
        self.calib, self.calib_kb, self.allow_requantize = calib, calib_kb, allow_requantize

    def texts(self) -> tuple[list[str], str, list[str]]:
        from appliance.quant import calib as cal

        if self.calib is not None:
            texts, skipped = cal.from_dir(self.calib)
            return texts, f"folder {self.calib}", skipped
        texts, sources = cal.from_kb(self.settings.data_path, self.settings.knowledge.collection)
        if texts or self.calib_kb:
            if not texts:
                from appliance.quant.types import QuantError

                raise QuantError("--calib-kb: the knowledge base is empty; run `appliance ingest DIR` first "
                                 "or pass --calib DIR")
            return texts, (f"knowledge base {self.settings.knowledge.collection!r}, "
                           f"{cal.describe_sources(sources)}"), []
        err_console.print("[yellow]warning:[/] no documents indexed and no --calib: calibrating and checking on "
                          "the bundled general text only, not on your documents")
        from appliance.quant.calib import GENERAL_TEXT

        return [GENERAL_TEXT.read_text(encoding="utf-8")], "bundled general text", []

    def open(self):
        from appliance.quant.pipeline import Options, Workbench
        from appliance.quant.types import FULL_PRECISION

        texts, origin, skipped = self.texts()
        q = self.settings.quantize
        opts = Options(self.source, texts, origin, calib_tokens=q.calib_tokens, eval_tokens=q.eval_tokens,
                       allow_requantize=self.allow_requantize, n_gpu_layers=self.settings.engine.n_gpu_layers,
                       skipped=skipped)
        self.progress = _progress_bar(self.quiet)
        wb = Workbench(opts, self.progress)
        if self.allow_requantize and wb.source_quant.upper() not in FULL_PRECISION:
            err_console.print(f"[yellow]warning:[/] {self.source.name} is already {wb.source_quant}: the result "
                              "carries both rounds of error, and its KLD is measured against that quantized source")
        return wb


def _progress_bar(quiet: bool):
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("{task.description:<22}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TimeRemainingColumn(), console=err_console, transient=True, disable=quiet)
    tasks: dict[str, int] = {}
    bar.start()

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=total)
    update.stop = bar.stop  # type: ignore[attr-defined]
    return update


def _one(bench_: _Bench, qtype: str, use_imatrix: bool, keeps, mixed: bool, out: Path | None, name: str | None,
         bound: float, force: bool, bench: bool, diagnose: bool, as_json: bool) -> None:
    from appliance.models.registry import default_name
    from appliance.quant.types import QuantError

    suffix = f"-{qtype.lower()}" + ("-imat" if use_imatrix else "")
    out = (out or bench_.settings.data_path / "models" / f"{bench_.source_name}{suffix}.gguf").resolve()
    name = name or default_name(out)
    if out.exists():
        raise QuantError(f"{out} exists; pass --out, or remove it (and `appliance models remove` it) first")
    bench_.registry.check_name(name)
    wb = bench_.open()
    try:
        cand = wb.build(qtype, out, use_imatrix, keeps, mixed, bench)
        passed = cand.quality.kld_mean <= bound
        report = {"source": str(bench_.source), **cand.to_dict(), "max_kld": bound, "passed": passed,
                  "output_type": cand.tensor_types.get("output.weight", cand.tensor_types.get("token_embd.weight")),
                  **wb.facts()}
        diagnosis = []
        if not passed and diagnose:
            diagnosis = wb.diagnose(qtype, out, use_imatrix, keeps, cand.quality.kld_mean, mixed)
    finally:
        bench_.progress.stop()
    report["diagnosis"] = diagnosis
    report["registered"] = passed or force
    if report["registered"]:
        bench_.registry.add(out, name, quantized=report)
        report["name"] = name
    else:
        out.unlink(missing_ok=True)  # a refused model is not kept: the source is untouched
    _print_one(report, as_json)
    if not report["registered"]:
        raise typer.Exit(1)


def _print_one(r: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(r))
        return
    console.print(f"{Path(r['source']).name} → {r['type']}{' + imatrix' if r['imatrix'] else ''}: "
                  f"{r['bytes'] / 2**20:.1f} MiB, {r['bits_per_weight']:.2f} bits/weight")
    console.print(f"calibration: {r['calibration']} ({r['calib_tokens_user']} tokens + {r['calib_tokens_general']} "
                  f"general); checked on {r['eval_tokens_scored']} held-out tokens")
    console.print(f"PPL {r['ppl_source']:.3f} → {r['ppl']:.3f} ({r['delta_ppl_pct']:+.1f} %), KLD mean "
                  f"{r['kld_mean']:.4f} (p99 {r['kld_p99']:.3f}), top-1 agreement {100 * r['top1_agreement']:.1f} %")
    if r["tok_s_b1"] is not None:
        console.print(f"decode: {r['tok_s_b1']:.1f} tok/s at batch 1, {r['tok_s_b16']:.1f} tok/s at batch 16")
    for d in r["diagnosis"][:3]:
        console.print(f"  keeping {d['group']} at Q8_0 → KLD {d['kld_mean']:.4f} ({d['kld_saved_pct']:.0f} % less): "
                      + " ".join(f"--keep '{k}'" for k in d["keep"]))
    if r["registered"]:
        tail = "" if r["passed"] else " (gate failed: registered because of --force)"
        console.print(f"[green]registered[/] as {r['name']}{tail}; use it with `appliance models use {r['name']}`")
    else:
        console.print(f"[red]not registered:[/] mean KLD {r['kld_mean']:.4f} exceeds the bound {r['max_kld']} "
                      "(quantize.max_kld); try a wider type, keep the tensors above higher, or pass --force")

