"""What each README command line runs as, and the one thing its comment promises, checked.

A step `SAME` is the README line as written (the workspace rewrites only http://host:8000, the API
key and /srv paths). A synopsis line (`a | b | c`, `[--flag]`) runs as each of its forms with small
inputs. The workspace (tests/readme_commands.py) has the sample guide indexed from `./docs` and
`./docs/hr` in the collection `hr`; a case that changes the index puts it back.
"""

from __future__ import annotations

import json
import re
import subprocess

from .readme_commands import SAME, Case, Workspace

R = list[subprocess.CompletedProcess]
PW = "echo correct-horse-battery | "


def _json(done: subprocess.CompletedProcess):
    return json.loads(done.stdout.strip().splitlines()[-1])


def _out(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def _incremental(w: Workspace, r: R) -> None:
    assert re.search(r"0 new, 1 changed, \d+ unchanged", _out(r[-1])), _out(r[-1])


def _collection_of(w: Workspace, source: str) -> str:
    done = w.sh("appliance docs list")
    row = next(line for line in done.stdout.splitlines() if source in line)
    return row.split("│")[2].strip()


def _quantized(name: str):
    def check(w: Workspace, r: R) -> None:
        listed = w.sh("appliance models list").stdout
        assert name in listed, listed
    return check


SUITE = '[[corpus]]\nname = "sample"\nfolder = "docs"\nqa = "knowledge/data/sample/qa.jsonl"\n'
TEMPLATE = ('instruction = "Answer with JSON only."\nitem = "{text}"\nmax_tokens = 48\n')
SCHEMA = '{"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}'
# "copy a GGUF into models/": the embedded model's file, wherever its package put it
COPY_MODEL = ("mkdir -p models && test -f models/x.gguf || "
              "cp \"$(appliance models list | sed -n 's/^smollm2-135m: //p')\" models/x.gguf")
ASK_BACKUP = 'appliance ask "How do I back up the appliance?"'

CASES: dict[str, Case] = {
    ".venv/bin/appliance serve": Case(["curl -s http://host:8000/healthz"],
                                      lambda w, r: json.loads(r[0].stdout), server=True),
    "appliance ingest ./docs": Case([SAME, "echo 'One more line.' >> docs/en/troubleshooting.txt", SAME],
                                    _incremental),
    "appliance ingest ./docs --reindex": Case(
        [SAME], lambda w, r: _assert(re.search(r"rebuilding the whole index from \d folder", _out(r[0])), r)),
    "appliance ingest ./docs/hr --collection hr": Case(
        [SAME], lambda w, r: _assert(_collection_of(w, "hr/leave.md") == "hr", r)),
    "appliance collections [list | create NAME | grant GROUP NAME read|write | revoke GROUP NAME]": Case(
        ["appliance collections list", "appliance collections create legal",
         "appliance collections grant lawyers legal write",
         "appliance collections", "appliance collections revoke lawyers legal", "appliance collections"],
        lambda w, r: _assert("lawyers (write)" in r[3].stdout and "lawyers" not in r[5].stdout, r)),
    "appliance users group add|remove GROUP USER | list": Case(
        [PW + "appliance users add dora --password-stdin", "appliance users group add auditors dora",
         "appliance users group list", "appliance users group remove auditors dora", "appliance users group list"],
        lambda w, r: _assert(re.search(r"auditors\s+members: dora", r[2].stdout) and "dora" not in
                             r[4].stdout.split("auditors")[-1].split("\n")[0], r)),
    "appliance docs list | stats | remove PATH": Case(
        ["appliance docs list", "appliance docs stats", "appliance docs remove en/performance.md",
         "appliance docs list", "appliance ingest ./docs"],
        lambda w, r: _assert("performance.md" in r[0].stdout and "performance.md" not in r[3].stdout
                             and _json_text(r[1])["files"]["done"] == 11, r)),
    'appliance search "how do I rotate the VPN certificate?" [-k 10] [--json] [--as USER]': Case(
        [PW + "appliance users add erin --password-stdin",
         'appliance search "how do I rotate the VPN certificate?" -k 10 --json --as erin',
         'appliance search "how do I rotate the VPN certificate?"'],
        lambda w, r: _assert(0 < len(_json(r[1])) <= 10 and all(h["source"] != "hr/leave.md" for h in _json(r[1])), r)),
    "appliance eval retrieval knowledge/data/sample/qa.jsonl [--json]": Case(
        ["appliance eval retrieval knowledge/data/sample/qa.jsonl --json"],
        lambda w, r: _assert(0 < _json(r[0])["by_lang"]["en"]["recall@5"] <= 1, r)),
    "appliance eval retrieval --suite SUITE.toml [--root DIR] [--work DIR] [--no-peer] [--out F.json]": Case(
        [f"printf '{SUITE}' > SUITE.toml",
         "appliance eval retrieval --suite SUITE.toml --root . --work ./suite-work --out F.json"],
        lambda w, r: _assert(_suite_min(w.root / "F.json") > 0, r)),
    "inline: appliance eval retrieval --suite my-suite.toml --root /srv/docs --out figures.json": Case(
        [f"printf '{SUITE}' > my-suite.toml", SAME],
        lambda w, r: _assert(_suite_min(w.root / "figures.json") > 0, r)),
    "appliance eval answers knowledge/data/sample/qa.jsonl [--json] [--limit N] [--one-user] [--out F.json]": Case(
        ["appliance eval answers knowledge/data/sample/qa.jsonl --json --limit 3 --one-user --out answers.json"],
        lambda w, r: _assert(len(json.loads((w.root / "answers.json").read_text())["rows"]) == 3, r)),
    "appliance eval loaders ./docs [--json]": Case(
        ["appliance eval loaders ./docs", "appliance eval loaders ./docs --json"],
        lambda w, r: _assert("content sentences lost" in r[0].stdout and _json(r[1])["lost_share"] <= 0.01, r)),
    'appliance ask "question"': Case(
        [ASK_BACKUP], lambda w, r: _assert("[1] en/administration.html" in r[0].stdout, r)),
    'appliance ask --doc SOURCE "question"': Case(
        ['appliance ask --doc en/security-policy.pdf "How long must a password be?"'],
        lambda w, r: _assert("security-policy.pdf" in r[0].stdout, r), timeout=1200),
    "appliance summarize SOURCE|FILE [--json] [--max-tokens 512]": Case(
        ["appliance summarize faq.md --json --max-tokens 64", "appliance summarize zh/常见问题.txt --max-tokens 64"],
        lambda w, r: _assert(_json_text(r[0])["answer"].strip() and r[1].stdout.strip(), r), timeout=1200),
    "appliance users add NAME [--admin] [--password-stdin] | list | remove | passwd": Case(
        [PW + "appliance users add frank --admin --password-stdin", "appliance users list",
         PW + "appliance users passwd frank --password-stdin", "appliance users remove frank", "appliance users list"],
        lambda w, r: _assert("frank" in r[1].stdout and "frank" not in r[4].stdout, r)),
    "appliance users key create NAME": Case(
        [PW + "appliance users add gina --password-stdin", "appliance users key create gina"],
        lambda w, r: _assert(re.fullmatch(r"apl-\S{40,}", r[1].stdout.strip()), r)),
    "appliance users key revoke KEY|ID|NAME": Case(
        [PW + "appliance users add hugo --password-stdin", "appliance users key create hugo",
         "appliance users key revoke hugo"], lambda w, r: _assert("revoked" in _out(r[2]), r)),
    "appliance models list | add PATH [--name N] | remove NAME | use NAME | verify": Case(
        ["appliance models list", COPY_MODEL,
         "appliance models add models/x.gguf --name spare", "appliance models use spare", "appliance models verify",
         "appliance models use smollm2-135m", "appliance models remove spare", "appliance models list"],
        lambda w, r: _assert("spare" in r[3].stdout + r[3].stderr and "spare" not in r[7].stdout, r)),
    "inline: appliance models add models/x.gguf --name big && appliance models use big": Case(
        [COPY_MODEL, SAME,
         "appliance models list", "appliance models use smollm2-135m", "appliance models remove big"],
        lambda w, r: _assert(re.search(r"│ \* │ big ", r[2].stdout), r)),
    "appliance config init | show": Case(
        ["mkdir -p cfg && cd cfg && appliance config init && appliance config show"],
        lambda w, r: _assert((w.root / "cfg" / "appliance.toml").exists() and '"engine"' in r[0].stdout, r)),
    "appliance batch run TEMPLATE.toml --out results.jsonl [--over SOURCE ...] [--schema schema.json] "
    "[--window 4]": Case(
        [f"printf '{TEMPLATE}' > TEMPLATE.toml && printf '%s' '{SCHEMA}' > schema.json",
         "appliance batch run TEMPLATE.toml --out results.jsonl --over zh/常见问题.txt --schema schema.json "
         "--window 4"],
        lambda w, r: _assert(_batch_lines(w) and all("ok" in line for line in _batch_lines(w)), r), timeout=1200),
    "appliance backup OUT.tar.zst [--json]": Case(
        ["appliance backup OUT.tar.zst --json"], lambda w, r: _assert(_json(r[0])["counts"]["documents"] == 11, r)),
    "appliance restore IN.tar.zst [--json]": Case(
        ["appliance backup IN.tar.zst", "APPLIANCE_DATA_DIR=./restored appliance restore IN.tar.zst --json"],
        lambda w, r: _assert(_json(r[1])["index"].startswith("consistent"), r)),
    "appliance backup /srv/backup/appliance-$(date +%F).tar.zst": Case(
        [SAME, "ls backup"], lambda w, r: _assert(re.search(r"appliance-\d{4}-\d\d-\d\d\.tar\.zst", r[1].stdout), r)),
    "appliance restore /srv/backup/appliance-2026-12-01.tar.zst": Case(
        ["appliance backup ./backup/appliance-2026-12-01.tar.zst", "rm -rf restored-2",
         "APPLIANCE_DATA_DIR=./restored-2 " + "appliance restore /srv/backup/appliance-2026-12-01.tar.zst"],
        lambda w, r: _assert("consistent" in _out(r[2]), r)),
    "appliance plan [MODEL] [--vram 24GB] [--ctx 4096] [--concurrency 16] [--kv-type q8_0] [--json]": Case(
        ["appliance plan", "appliance plan smollm2-135m --vram 24GB --ctx 4096 --concurrency 16 --kv-type q8_0 --json"],
        lambda w, r: _assert(_json_text(r[1])["concurrency"] == 16 and _json_text(r[1])["kv_type"] == "q8_0", r)),
    "appliance plan --params 13B --layers 40 --kv-heads 40 --head-dim 128 --quant Q4_K_M --vram 24GB "
    "--concurrency 4": Case([SAME], lambda w, r: _assert("max concurrency at 4096 tokens: 4" in r[0].stdout, r)),
}


def _assert(ok, r: R) -> None:
    assert ok, "\n".join(_out(d)[-2000:] for d in r)


def _json_text(done: subprocess.CompletedProcess):
    return json.loads(done.stdout)


def _suite_min(path) -> float:
    """The suite's minimum recall@5 over its corpora (English), from its --out file."""
    return json.loads(path.read_text())["ours"]["en"]["recall@5"]["min"]


def _batch_lines(w: Workspace) -> list[dict]:
    return [json.loads(line) for line in (w.root / "results.jsonl").read_text().splitlines() if line.strip()]


def _hr_grants(w: Workspace) -> str:
    return next(line for line in w.sh("appliance collections").stdout.splitlines() if "│ hr " in line)


ADD_USER = "appliance users list | grep -q '^{0} ' || " + PW + "appliance users add {0} --password-stdin"

CASES.update({
    # Collections and groups
    "appliance users group add hr-team alice": Case(
        [ADD_USER.format("alice"), SAME, "appliance users group list"],
        lambda w, r: _assert(re.search(r"hr-team\s+members: alice", r[2].stdout), r)),
    "appliance collections grant hr-team hr read": Case(
        [SAME], lambda w, r: _assert("hr-team (read)" in _hr_grants(w), r)),
    "appliance collections": Case(
        [SAME], lambda w, r: _assert(re.search(r"│ default\s+│ 1\d\s+│ everyone", r[0].stdout)
                                     and re.search(r"│ hr\s+│ 1\s+│", r[0].stdout), r)),
    "appliance users group remove everyone intern1": Case(
        [ADD_USER.format("intern1"), SAME, 'appliance search "back up" --json --as intern1'],
        lambda w, r: _assert(_json(r[2]) == [], r)),
    "appliance collections revoke hr-team hr": Case(
        ["appliance collections grant hr-team hr read", SAME],
        lambda w, r: _assert("hr-team" not in _hr_grants(w), r)),
    # Quantizing: the embedded model to F16 first, as the README's prose says, then the synopsis forms
    "inline: appliance quantize smollm2-135m --type F16 --allow-requantize --name smol-f16": Case(
        ["appliance models list | grep -q smol-f16 || " + "appliance quantize smollm2-135m --type F16 "
         "--allow-requantize --name smol-f16"], _quantized("smol-f16"), timeout=1200),
    "inline: appliance quantize smol-f16 --type Q4_K_M --calib ./docs": Case(
        ["appliance models list | grep -q smol-f16 || appliance quantize smollm2-135m --type F16 "
         "--allow-requantize --name smol-f16", SAME], lambda w, r: _assert("registered as" in _out(r[1]), r),
        timeout=1200),
    "appliance quantize SRC.gguf [--type Q4_K_M] [--calib DIR | --calib-kb] [--no-imatrix] [--keep PATTERN=TYPE ...] "
    "[--no-mixed] [--out PATH] [--name NAME] [--max-kld 0.1] [--force] [--allow-requantize] [--json]": Case(
        ["appliance quantize smollm2-135m --type Q8_0 --calib-kb --no-imatrix --keep 'ffn_down\\.weight=Q8_0' "
         "--out q8.gguf --name smol-q8 --max-kld 0.1 --allow-requantize --json"],
        lambda w, r: _assert(_json(r[0])["registered"] and _json(r[0])["calibration"].startswith("knowledge base"), r),
        timeout=1200),
    "appliance quantize SRC.gguf --compare Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0 [--vram 24GB] [--calib DIR] [--json]": Case(
        ["appliance quantize smollm2-135m --allow-requantize --compare Q8_0,Q4_0 --vram 24GB --calib ./docs --json"],
        lambda w, r: _assert(_json(r[0])["recommended"]["type"] in ("Q8_0", "Q4_0"), r), timeout=1200),
    # Benchmarks: the README's line, at a small size, writing into the workspace
    "appliance bench [--workload chat|rag|rag-quote|long-output|short|long-context] [--concurrency 1,4,16,32] "
    "[--ladder [--ladder-source F16_MODEL]] [--url URL --model NAME [--key K] [--with-appliance]] [--no-ceiling] "
    "[--out bench-out]": Case(
        ["appliance bench --workload rag-quote --concurrency 1,2 --requests 1 --no-ceiling --out bench-out"],
        lambda w, r: _assert(all(run["summary"]["errors"] == 0 for run in
                                 json.loads((w.root / "bench-out" / "results.json").read_text())["runs"]), r)),
    "inline: appliance bench --ladder --ladder-source smol-f16": Case(
        ["appliance models list | grep -q smol-f16 || appliance quantize smollm2-135m --type F16 "
         "--allow-requantize --name smol-f16", SAME + " --workload short --concurrency 1 --requests 1 --no-ceiling "
         "--out bench-ladder"],
        lambda w, r: _assert(len(json.loads((w.root / "bench-ladder" / "results.json").read_text())["runs"]) >= 4, r),
        timeout=1500),
    ".venv/bin/python scripts/bench_engine.py --json": Case(
        ["= --users 2 --rounds 1 --out-tokens 8 --out bench-out/engine.json"],
        lambda w, r: _assert(_json(r[0]), r)),
    ".venv/bin/python scripts/bench_engine.py --spec --json": Case(
        ["= --users 2 --out-tokens 8 --out bench-out/spec.json"], lambda w, r: _assert(_json(r[0]), r)),
    ".venv/bin/python scripts/bench_ingest.py --mb 50": Case(
        ["= --mb 0.5 --out bench-out/ingest.json"],
        lambda w, r: _assert(json.loads((w.root / "bench-out" / "ingest.json").read_text()), r)),
    ".venv/bin/python scripts/bench_scale.py": Case(
        ["= --files 50 --big-mb 0.5 --out bench-out/scale.json"],
        lambda w, r: _assert(json.loads((w.root / "bench-out" / "scale.json").read_text()), r)),
    ".venv/bin/python scripts/bench_browser.py": Case(
        ["= --concurrency 1,2 --out bench-out/browser"],
        lambda w, r: _assert(list((w.root / "bench-out" / "browser").glob("*.json")), r)),
    ".venv/bin/python scripts/bench_scale_out.py": Case(
        ["= --concurrency 1 --requests 1 --rounds 1 --out bench-out/scale-out.json"],
        lambda w, r: _assert(json.loads((w.root / "bench-out" / "scale-out.json").read_text()), r)),
    ".venv/bin/python scripts/soak.py --seconds 300": Case(
        ["= --seconds 20 --workers 2 --out bench-out/soak.json"],
        lambda w, r: _assert(json.loads((w.root / "bench-out" / "soak.json").read_text()), r)),
    "inline: .venv/bin/appliance doctor": Case([SAME], lambda w, r: _assert(r[0].stdout.strip().endswith("ready"), r)),
    "inline: appliance doctor": Case([SAME], lambda w, r: _assert("index" in r[0].stdout, r)),
    "inline: appliance models list": Case([SAME], lambda w, r: _assert("smollm2-135m" in r[0].stdout, r)),
})

K_LINE = 'K="Authorization: Bearer apl-…"'
CURL = {
    'curl -H "$K" http://host:8000/v1/documents': lambda w, r: _assert(_json_text(r[-1])["stats"]["chunks"] > 0, r),
    'curl -H "$K" -F files=@handbook.pdf -F files=@faq.md http://host:8000/v1/documents':
        lambda w, r: _assert(_json_text(r[-1])["counts"]["failed"] == 0, r),
    'curl -H "$K" -X DELETE http://host:8000/v1/documents/handbook.pdf': lambda w, r: _assert(r[-1].stdout, r),
    'curl -H "$K" -X POST http://host:8000/v1/documents/reindex': lambda w, r: _assert(r[-1].stdout, r),
}
CASES[K_LINE] = Case([K_LINE + ' && curl -s -o /dev/null -w "%{http_code}" -H "$K" http://host:8000/v1/documents'],
                     lambda w, r: _assert(r[0].stdout == "200", r), server=True)
for _line, _check in CURL.items():
    _before = ([K_LINE + ' && curl -s -H "$K" -F files=@handbook.pdf http://host:8000/v1/documents']
               if "DELETE" in _line else [])
    CASES[_line] = Case(_before + [f"{K_LINE} && {_line}"], _check, server=True)
