"""The one settings object: `appliance.toml` plus `APPLIANCE_*` environment overrides.

Nothing is read at import time; call `load_settings()` once at process start and pass the
result down. `APPLIANCE_CONFIG` names another config file. `APPLIANCE_<FIELD>` overrides a
field, with `__` for nesting: `APPLIANCE_PORT=8001`, `APPLIANCE_ENGINE__N_CTX=2048`.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from appliance.errors import ConfigError

CONFIG_ENV = "APPLIANCE_CONFIG"
ENV_PREFIX = "APPLIANCE_"
DEFAULT_CONFIG_NAME = "appliance.toml"
# Variables that share our prefix but are not settings: the loader ignores them. Every one the
# code or docs read must be listed here (tests/test_config.py scans the tree for new ones).
NOT_SETTINGS = frozenset({
    "APPLIANCE_CONFIG",        # which config file
    "APPLIANCE_DEBUG",         # full tracebacks instead of one-line errors
    "APPLIANCE_LLAMA_LOG",     # show llama.cpp's own log
    "APPLIANCE_CMAKE_ARGS", "APPLIANCE_WHEEL_CACHE", "APPLIANCE_TORCH_SPEC", "APPLIANCE_TORCH_INDEX",
    "APPLIANCE_ENABLE_AMX",    # install.sh only
    "APPLIANCE_TEST_PYTHON",   # the test suite's interpreter for subprocesses
    "APPLIANCE_SOAK_SECONDS",  # how long the suite's soak test runs
})


class _Section(BaseModel):
    # Unknown keys are errors: a typo in appliance.toml must not be silently ignored.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EngineSettings(_Section):
    """Knobs of the llama.cpp inference engine."""

    n_ctx: int = Field(4096, ge=128, le=1_048_576,
                       description="KV cache size in tokens, shared by all sequences (unified cache).")
    n_seq_max: int = Field(16, ge=1, le=256,
                           description="Most sequences decoded together (running plus cached prefixes).")
    n_batch: int = Field(512, ge=16, description="Most tokens submitted in one llama_decode call.")
    n_ubatch: int = Field(512, ge=16, description="Physical micro-batch size inside llama.cpp.")
    n_threads: int = Field(0, ge=0, description="CPU threads for decoding; 0 = all cores.")
    n_gpu_layers: int = Field(-1, ge=-1,
                              description="Layers offloaded to the GPU; -1 = all (ignored on CPU-only builds).")
    flash_attn: Literal["auto", "on", "off"] = Field("auto", description="llama.cpp flash attention.")
    type_k: Literal["f16", "q8_0"] = Field("f16", description="KV cache type for keys.")
    type_v: Literal["f16", "q8_0"] = Field("f16", description="KV cache type for values.")
    prefill_chunk: int = Field(256, ge=8,
                               description="Most prompt tokens one sequence prefills per step (chunked prefill).")
    gen_reserve: int = Field(256, ge=0,
                             description="KV tokens reserved for generation when admitting a request.")
    max_queue: int = Field(64, ge=0, description="Waiting requests before submit answers 'overloaded'.")
    per_user_queue: int = Field(16, ge=1, description="Waiting requests allowed per user (fairness cap).")
    background_slots: int = Field(0, ge=0, description="Most sequences of background work (batch jobs, "
                                  "priority 1) running at once; 0 = half of n_seq_max. Interactive requests "
                                  "are always admitted first.")
    prefix_cache: bool = Field(True, description="Keep finished sequences' KV to share with new ones.")
    continuous_batching: bool = Field(True,
                                      description="Decode many sequences per step; off = one at a time.")
    default_max_tokens: int = Field(512, ge=1, description="max_tokens when a request gives none.")
    speculative: int = Field(0, ge=0, le=16, description="Most draft tokens per step from prompt lookup "
                             "(speculative decoding; answers that quote the documents gain most); 0 = off. "
                             "A request may set its own (\"speculative\": N or false).")
    draft_model: str = Field("", description="Speculative decoding's second proposer: a small GGUF (registry "
                             "name or path) with the chat model's vocabulary that drafts the next tokens; "
                             "empty = prompt lookup. Needs speculative > 0.")
    spec_min_output: int = Field(64, ge=1, description="Requests allowed fewer output tokens than this "
                                 "never speculate (short answers lose).")
    spec_min_accept: float = Field(0.3, ge=0, le=1, description="A request whose draft tokens, of those "
                                   "tried (a refused token ends its draft), are accepted less often than "
                                   "this (after 16 drafted tokens) stops speculating.")
    spec_max_decoders: int = Field(4, ge=1, description="No drafting while more sequences than this decode "
                                   "together: under load the batch is already efficient.")
    tpot_target_ms: float = Field(0, ge=0, description="Time per output token to hold while prompts are "
                                  "prefilled: each step carries only as many prompt tokens as fit it, by the "
                                  "step costs measured as the engine runs; 0 = off (full batches, faster "
                                  "first tokens, slower streams under load).")
    backend: Literal["local", "openai"] = Field("local", description="local = llama.cpp in this process; "
                                                "openai = an OpenAI-compatible serving cluster at remote_url "
                                                "(vLLM, llama.cpp servers, another appliance).")
    remote_url: str = Field("", description="backend = openai: the cluster's base address, e.g. "
                            "http://10.0.0.5:8000 (a trailing /v1 is accepted); its host is let through the "
                            "offline guard.")
    remote_model: str = Field("", description="backend = openai: the model id to ask for; empty = the "
                              "first one the cluster lists.")
    remote_key: SecretStr = Field(SecretStr(""), description="backend = openai: the cluster's API key (set "
                                  "it with APPLIANCE_ENGINE__REMOTE_KEY or remote_key_file; never printed).")
    remote_key_file: str = Field("", description="backend = openai: a file holding the cluster's API key.")
    remote_tokenizer: str = Field("", description="backend = openai: how prompts are counted for the "
                                  "context budget; empty = the cluster's /tokenize endpoint (vLLM, llama.cpp "
                                  "server, appliance), or the path of a GGUF with the same vocabulary, loaded "
                                  "vocabulary-only.")
    remote_timeout: float = Field(600.0, gt=0, description="backend = openai: longest wait in seconds for the "
                                  "cluster's next bytes.")
    remote_retries: int = Field(3, ge=0, le=10, description="backend = openai: retries, with back-off, when "
                                "the cluster cannot be connected to (never once a request was sent).")
    remote_max_streams: int = Field(64, ge=1, description="backend = openai: most requests open to the "
                                    "cluster at once; more are answered 'overloaded' (503, Retry-After).")


class KnowledgeSettings(_Section):
    """Chunking, ingest limits and retrieval of the knowledge base."""

    collection: str = Field("default", description="Knowledge base name (the Chroma collection holding every "
                                                   "access collection's vectors).")
    chunk_tokens: int = Field(300, ge=32, le=8192, description="Chunk budget in embedding-model tokens "
                              "(capped to what the embedding model reads, 224 for all-MiniLM-L6-v2).")
    chunk_overlap: int = Field(40, ge=0, description="Tokens carried over between neighbouring chunks.")
    max_file_mb: float = Field(50.0, gt=0, description="Files larger than this are skipped and reported.")
    embed_batch: int = Field(64, ge=1, description="Chunks per embedding batch.")
    embed_backend: Literal["auto", "torch", "onnx"] = Field("auto", description="Embedding runtime: auto = "
                                                            "ONNX Runtime int8 on machines without an NVIDIA GPU "
                                                            "(exported once locally), torch on GPU machines.")
    candidates: int = Field(40, ge=5, description="Candidates taken from each of dense and lexical search.")
    dense_weight: float = Field(0.5, ge=0, le=1, description="Weight of dense ranks against lexical "
                                "ones (weight 1) for other questions.")
    cjk_dense_weight: float = Field(0.05, ge=0, le=1, description="Weight of dense ranks for Chinese "
                                    "questions (the default embedder is English-only).")
    rerank_model: str = Field("", description="Folder of a local cross-encoder for re-ranking; empty = off.")
    max_per_file: int = Field(3, ge=0, description="Most results one file may contribute to a search "
                              "(stops a keyword-stuffed file from filling the list); 0 = no cap.")
    sample_docs: bool = Field(True, description="Index the bundled sample guide on first start when empty.")
    chroma_url: str = Field("", description="A Chroma server (http://host:8001) for the vectors instead of "
                            "data/chroma; the manifest and lexical index stay in this data directory, so "
                            "one front-end per knowledge base.")


class ChatSettings(_Section):
    """How the RAG chat builds its prompt from retrieved excerpts."""

    top_k: int = Field(0, ge=0, le=20, description="Excerpts per question; 0 = auto (2 for models under "
                       "1B parameters, which lose the thread in long prompts, else 4).")
    quote_excerpts: int = Field(4, ge=1, le=20, description="Excerpts a quoted answer (quote and "
                                "hybrid styles) picks its sentences from, at least top_k: no model reads "
                                "them, so a small model's limit does not apply; the gate still judges top_k.")
    excerpt_chars: int = Field(0, ge=0, description="Longest excerpt in characters; 0 = auto "
                               "(700 for models under 1B parameters, else 1200).")
    context_tokens: int = Field(1536, ge=256, description="Prompt budget (excerpts, history, question) "
                                "in chat-model tokens; the oldest history turns are dropped first.")
    min_relevance_en: float = Field(0.165, ge=0, le=1, description="English questions: lowest relevance "
                                    "(the best dense similarity of one excerpt sentence times the best share of the "
                                    "question's term weight, everyday English words weighing less, found in one "
                                    "excerpt) before answering 'not "
                                    "covered'; calibrate on your questions with `appliance eval gate`.")
    min_relevance_zh: float = Field(0.155, ge=0, le=1, description="Chinese questions: the same, "
                                    "with its own threshold.")
    partial_floor_en: float = Field(0.10, ge=0, le=1, description="English questions scoring from here up "
                                    "to min_relevance_en get the best passages quoted under a warning ('These "
                                    "passages may not answer your question'; API `coverage: \"partial\"`); below "
                                    "it, 'not covered'. Equal to min_relevance_en: no partial answers.")
    partial_floor_zh: float = Field(0.07, ge=0, le=1, description="Chinese questions: the same, below "
                                    "min_relevance_zh.")
    answer_style: Literal["auto", "generate", "quote", "hybrid"] = Field(
        "auto", description="How answers are written: `generate` (the model writes them), `quote` (the "
        "excerpts' sentences that answer the question, verbatim, no model), `hybrid` (a one-sentence "
        "generated lead-in, then the quotes); `auto` = quote for models under 1B parameters, else generate.")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        """The gate's old keys scored another signal: say what replaced them rather than 'extra input'."""
        if isinstance(data, dict):
            for old, new in (("min_similarity", "min_relevance_en"), ("min_overlap", "min_relevance_zh")):
                if old in data:
                    raise ValueError(f"chat.{old} was replaced by chat.{new} (the gate now scores similarity "
                                     "times term coverage; see the README's configuration table)")
        return data


class QuantizeSettings(_Section):
    """`appliance quantize`: calibration size and the quality gate."""

    max_kld: float = Field(0.10, gt=0, description="Largest mean KL divergence (nats per token, on held-out "
                           "document text) a quantized model may have and still be registered.")
    calib_tokens: int = Field(16384, ge=512, description="Calibration tokens for the importance matrix "
                              "(a quarter of them from the bundled general text).")
    eval_tokens: int = Field(4096, ge=128, description="Held-out tokens the quality gate reads (half scored).")


class ServerSettings(_Section):
    """How the HTTP server is reached."""

    https_proxy: bool = Field(False, description="TLS ends at a reverse proxy in front (nginx, Caddy): "
                                                 "cookies are sent Secure only, and browsers are told to stay on "
                                                 "HTTPS (README: Behind a reverse proxy with TLS).")


class Settings(_Section):
    """All settings of one appliance instance."""

    data_dir: Path = Field(Path("data"), description="Where the index, manifest, users and registry live.")
    chat_model: str = Field("", description="Registry name or GGUF path of the chat model; "
                                            "empty = the registry default (embedded SmolLM2).")
    embedding_model: str = Field("", description="Folder of a sentence-transformers model; "
                                                 "empty = the embedded all-MiniLM-L6-v2.")
    host: str = Field("127.0.0.1", description="Address to bind; 0.0.0.0 serves the intranet.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port of the UI and the API.")
    offline: bool = Field(True, description="Refuse every non-loopback network connection.")
    offline_allow_hosts: list[str] = Field(default_factory=list,
                                           description="Hosts or IPs allowed through the offline guard.")
    upload_requires_admin: bool = Field(True, description="Only administrators may upload documents in the UI.")
    server: ServerSettings = Field(default_factory=ServerSettings, description="HTTP server.")
    engine: EngineSettings = Field(default_factory=EngineSettings, description="Inference engine.")
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings, description="Knowledge base.")
    chat: ChatSettings = Field(default_factory=ChatSettings, description="RAG prompt.")
    quantize: QuantizeSettings = Field(default_factory=QuantizeSettings, description="appliance quantize.")
    config_path: Path | None = Field(None, exclude=True,
                                     description="The file these settings came from (set by the loader).")

    def resolve(self, path: Path | str) -> Path:
        """Resolve a relative path against the config file's folder (else the working dir)."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        base = self.config_path.parent if self.config_path else Path.cwd()
        return (base / p).resolve()

    def network_hosts(self) -> list[str]:
        """Hosts the offline guard lets through: the allow-list, the bind address, and the cluster and
        vector-store servers this configuration names."""
        from urllib.parse import urlsplit

        urls = [self.engine.remote_url if self.engine.backend == "openai" else "", self.knowledge.chroma_url]
        return [*self.offline_allow_hosts, self.host, *(urlsplit(u).hostname or "" for u in urls if u)]

    @property
    def data_path(self) -> Path:
        """The data directory as an absolute path."""
        return self.resolve(self.data_dir)


def find_config_file(explicit: str | Path | None = None,
                     environ: dict[str, str] | None = None) -> Path | None:
    """The config file in force: explicit argument, then APPLIANCE_CONFIG, then ./appliance.toml."""
    environ = os.environ if environ is None else environ
    if explicit:
        return Path(explicit).expanduser().resolve()
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV]).expanduser().resolve()
    local = Path.cwd() / DEFAULT_CONFIG_NAME
    return local.resolve() if local.exists() else None


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key in NOT_SETTINGS:
            continue
        parts = key[len(ENV_PREFIX):].lower().split("__")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _parse_env_value(raw)
    return tree


def _parse_env_value(raw: str) -> Any:
    # JSON lets lists and booleans through (`["a","b"]`, `true`); anything else stays a string
    # for pydantic to coerce, so `APPLIANCE_PORT=8001` and `APPLIANCE_DATA_DIR=/x` both work.
    stripped = raw.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            pass
    return raw


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _validation_message(err: ValidationError, origin: str) -> str:
    lines = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(root)"
        env = ENV_PREFIX + "__".join(str(p) for p in e["loc"]).upper()
        lines.append(f"{field}: {e['msg']} (got {e.get('input')!r}; set in {origin} or {env})")
    return "invalid configuration: " + "; ".join(lines)


def load_settings(path: str | Path | None = None,
                  environ: dict[str, str] | None = None) -> Settings:
    """Load settings from the config file (if any) and the environment. Raises ConfigError."""
    environ = dict(os.environ if environ is None else environ)
    config_file = find_config_file(path, environ)
    data: dict[str, Any] = {}
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"config file not found: {config_file}")
        try:
            data = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{config_file}: not valid TOML: {e}") from None
    data = _merge(data, _env_overrides(environ))
    try:
        settings = Settings.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_validation_message(e, str(config_file or "environment"))) from None
    settings.config_path = config_file
    return settings


def default_config_text() -> str:
    """A commented appliance.toml with every field at its default, generated from the model."""
    lines = ["# appliance configuration. Every field can be overridden by APPLIANCE_<FIELD>",
             "# (nested with __, e.g. APPLIANCE_ENGINE__N_CTX=8192).",
             "# Defaults are shown commented out: uncomment a line to change it. Lines left commented",
             "# follow the defaults of the installed version, so an upgrade's better defaults apply.", ""]
    lines += _section_lines(Settings, "")
    return "\n".join(lines) + "\n"


def _section_lines(model: type[BaseModel], prefix: str) -> list[str]:
    lines: list[str] = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            nested.append((name, ann))
            continue
        default = field.get_default(call_default_factory=True)
        lines.append(f"# {field.description}")
        lines.append(f"# {name} = {_toml_value(default)}")
    for name, sub in nested:
        lines += ["", f"[{prefix}{name}]"] + _section_lines(sub, f"{prefix}{name}.")
    return lines


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def write_default_config(path: Path) -> bool:
    """Write the default config to `path` unless a file is already there. Returns True if written."""
    if path.exists():
        return False
    path.write_text(default_config_text(), encoding="utf-8")
    return True
