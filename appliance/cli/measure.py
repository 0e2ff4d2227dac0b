"""`appliance plan` (the memory ledger) and `appliance bench` (load over HTTP): measurement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from appliance.cli.common import ConfigOpt, JsonOpt, console, load_cli_settings
from appliance.models.metadata import human_bytes


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("plan")(plan_command)
    app.command("bench")(bench_command)


def plan_command(model: Annotated[str | None, typer.Argument(help="Registry name or GGUF path "
                                                             "(default: the configured model).")] = None,
                 vram: Annotated[str | None, typer.Option(help="Device memory, e.g. 24GB (default: detected).")] = None,
                 ctx: Annotated[int, typer.Option("--ctx", help="Context tokens per sequence.")] = 4096,
                 concurrency: Annotated[int, typer.Option(help="Sequences served at once.")] = 16,
                 kv_type: Annotated[str, typer.Option(help="KV cache type: f16 or q8_0.")] = "f16",
                 params: Annotated[str | None, typer.Option(help="Describe a model instead: parameters, "
                                                            "e.g. 13B.")] = None,
                 layers: Annotated[int | None, typer.Option(help="Described model: layers.")] = None,
                 kv_heads: Annotated[int | None, typer.Option(help="Described model: KV heads.")] = None,
                 heads: Annotated[int | None, typer.Option(help="Described model: attention heads.")] = None,
                 head_dim: Annotated[int | None, typer.Option(help="Described model: head size.")] = None,
                 vocab: Annotated[int, typer.Option(help="Described model: vocabulary size.")] = 32000,
                 quant: Annotated[str, typer.Option(help="Described model: quantization, e.g. Q4_K_M.")] = "Q4_K_M",
                 measure: Annotated[bool, typer.Option(help="Measure compute buffers with llama.cpp "
                                                       "when the model file is here.")] = True,
                 as_json: JsonOpt = False,
                 config: ConfigOpt = None) -> None:
    """The memory ledger: weights, KV per token/sequence/total, compute buffers, headroom, what fits."""
    from appliance.plan import Shape, detect_device_bytes, parse_size, plan

    device, where = (parse_size(vram), "given") if vram else detect_device_bytes()
    compute = None
    if params:
        if not (layers and kv_heads and head_dim):
            raise typer.BadParameter("a described model needs --params, --layers, --kv-heads and --head-dim")
        shape = Shape(f"{params} (described)", parse_size(params), layers, kv_heads, head_dim, quant,
                      n_head=heads or kv_heads, n_vocab=vocab)
    else:
        shape, path = _shape_of(model, config)
        if measure:
            from appliance.engine.llama import ContextConfig, measure_buffers

            total = min(ctx * concurrency, 262_144)
            compute = measure_buffers(ContextConfig(model_path=path, n_ctx=total, n_seq_max=min(concurrency, 64),
                                                    type_k=kv_type, type_v=kv_type))["compute"] or None
    ledger = plan(shape, device, ctx, concurrency, kv_type, compute)
    if as_json:
        print(json.dumps(ledger.to_dict()))
        return
    _print_ledger(ledger, where)
    if not ledger.fits:
        raise typer.Exit(1)


def _shape_of(model: str | None, config: Path | None):
    from appliance.models.registry import ModelRegistry
    from appliance.plan import Shape

    settings = load_cli_settings(config)
    entry = ModelRegistry(settings.data_path).resolve(model or settings.chat_model)
    shape = Shape.of(entry.name, entry.model_info)
    return shape, Path(entry.path)


def _ceiling_rates(settings):
    from appliance.bench.ceiling import measure_for

    console.print("measuring this machine's prefill and decode rates (the ceiling) …")
    rates = measure_for(settings)
    console.print(f"prefill {rates.prefill_tok_s:.0f} tok/s; decode " + ", ".join(
        f"batch {b}: {r:.0f}" for b, r in rates.decode_tok_s.items()) + " tok/s")
    return rates


def _model_path(settings, spec: str) -> str:
    """A registry name or GGUF path as an absolute path (the bench's servers have their own registry)."""
    from appliance.models.registry import ModelRegistry

    return str(Path(ModelRegistry(settings.data_path).resolve(spec).path))


def _print_ledger(ledger, where: str) -> None:
    t = Table("item", "bytes", "", title=f"memory ledger: {ledger.model} {ledger.quant}, KV {ledger.kv_type}, "
              f"{ledger.concurrency} × {ledger.context} tokens")
    rows = [("weights", ledger.weights_bytes, ""),
            ("KV per token", ledger.kv_bytes_per_token, ""),
            ("KV per sequence", ledger.kv_bytes_per_seq, f"{ledger.context} tokens"),
            ("KV for the concurrency", ledger.kv_bytes_total, f"{ledger.concurrency} sequences"),
            ("compute buffers", ledger.compute_bytes, "measured (llama.cpp)" if ledger.compute_measured
             else "estimated"),
            ("runtime overhead", ledger.overhead_bytes, "estimated"),
            ("total", ledger.total_bytes, ""),
            ("device memory", ledger.device_bytes, where),
            ("headroom", ledger.free_bytes, "" if ledger.fits else "[red]does not fit[/]")]
    for name, value, note in rows:
        t.add_row(name, human_bytes(value), note)
    console.print(t)
    console.print(f"max concurrency at {ledger.context} tokens: {ledger.max_concurrency}; "
                  f"max context at concurrency {ledger.concurrency}: {ledger.max_context} tokens")
    for line in ledger.advice:
        console.print(f"[yellow]→[/] {line}")


def bench_command(workload: Annotated[str, typer.Option(help="chat, rag, rag-quote, long-output, short, "
                                                        "long-context.")] = "chat",
                  concurrency: Annotated[str, typer.Option(help="Users to sweep, e.g. 1,4,16,32.")] = "1,4,16",
                  requests: Annotated[int, typer.Option(help="Requests per user per run.")] = 2,
                  ladder: Annotated[bool, typer.Option(help="Run the optimisation ladder (own server per "
                                                        "rung) at the highest concurrency.")] = False,
                  ladder_source: Annotated[str | None, typer.Option(help="Ladder: first serve this unquantized "
                                                                   "model (registry name or GGUF, e.g. the F16 "
                                                                   "source of `appliance quantize`).")] = None,
                  url: Annotated[str | None, typer.Option(help="Another OpenAI-compatible server "
                                                          "(base URL ending in /v1).")] = None,
                  model: Annotated[str, typer.Option(help="Model name for --url.")] = "smollm2-135m",
                  key: Annotated[str, typer.Option(help="API key for --url.")] = "",
                  with_appliance: Annotated[bool, typer.Option(help="With --url: also run the appliance, "
                                                               "for one comparison table.")] = False,
                  out: Annotated[Path, typer.Option(help="Output folder.")] = Path("bench-out"),
                  ceiling: Annotated[bool, typer.Option(help="Measure this machine's prefill and decode rates "
                                                        "first and report each run's share of its ceiling.")] = True,
                  config: ConfigOpt = None) -> None:
    """Closed-loop load over the HTTP API: TTFT/TPOT/latency percentiles, throughput, 503s, KV peaks.

    Without --url it starts its own appliance server (current config) on a free port and stops it after.
    """
    import threading

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from appliance.bench.report import meta_for, table, write
    from appliance.bench.runner import BenchOptions, ladder_rungs, run_bench
    settings = load_cli_settings(config)
    levels = [int(x) for x in concurrency.split(",") if x.strip()]
    # The bench's own server: your config file and chat model, a temporary data directory (holding the
    # sample knowledge base when the rag profile needs one), so a production index is never touched.
    server_env = {"APPLIANCE_KNOWLEDGE__SAMPLE_DOCS": "true" if workload == "rag" else "false"}
    if settings.config_path:
        server_env["APPLIANCE_CONFIG"] = str(settings.config_path)
    if settings.chat_model:
        server_env["APPLIANCE_CHAT_MODEL"] = _model_path(settings, settings.chat_model)
    source = _model_path(settings, ladder_source) if ladder_source else ""
    opts = BenchOptions(workload, levels, requests, ladder, url, model, key, with_appliance, server_env, source)
    rungs = ladder_rungs(source)
    runs_planned = len(rungs) if ladder else len(levels) * (1 + (with_appliance and url is not None))
    total = (max(levels) * runs_planned if ladder else sum(levels) * (runs_planned // len(levels))) * requests
    rates = _ceiling_rates(settings) if ceiling and (not url or with_appliance) else None
    stop = threading.Event()
    runs = []
    with Progress(TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as bar:
        task = bar.add_task("requests", total=total)
        try:
            run_bench(opts, on_request=lambda rec: bar.advance(task), stop=stop, runs=runs)
        except KeyboardInterrupt:  # Ctrl-C: keep the runs that ended, write a partial report
            stop.set()
    meta = meta_for(opts, settings.engine.model_dump(mode="json"))
    meta["partial"] = stop.is_set()
    if rates is not None:
        from appliance.bench.ceiling import add_share

        meta["rates"] = rates.to_dict()
        for run in runs:
            # the ceiling is the configured model's on this machine: not another server's, not the source's
            if (not url or run.target != model) and not (ladder_source and run.target == rungs[0][0]):
                add_share(run, rates)
    files = write(out, runs, meta, ladder)
    from appliance.bench.load import summarise

    console.print(table([summarise(r) for r in runs], ladder))
    console.print("written: " + ", ".join(str(f) for f in files))
