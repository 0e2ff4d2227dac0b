"""Messages to prompt tokens with a GGUF's own chat template and vocabulary.

The local engine counts and feeds these tokens; the remote backend uses the same class on a
vocabulary-only load of the cluster's GGUF to budget prompts without asking the cluster.
"""

from __future__ import annotations

from pathlib import Path

from appliance.engine.chat_template import ChatTemplate


class PromptTokenizer:
    """`tokenize_messages()` over a loaded runner (a full model or a vocabulary-only one)."""

    def __init__(self, runner) -> None:
        self.runner = runner
        special = runner.special_tokens()
        self.bos_text = runner.token_text(special["bos"]) if special["bos"] >= 0 else ""
        eos_text = runner.token_text(special["eos"]) if special["eos"] >= 0 else ""
        self.template = ChatTemplate(runner.chat_template(), self.bos_text, eos_text)

    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        """Render the chat template and tokenize (special tokens parsed)."""
        text = self.template.render(messages, add_generation_prompt=True)
        # Templates that write the BOS text themselves must not get a second one.
        add_bos = not (self.bos_text and text.startswith(self.bos_text))
        return self.runner.tokenize(text, add_special=add_bos, parse_special=True)

    @classmethod
    def vocab_only(cls, gguf: Path) -> PromptTokenizer:
        """Load only the vocabulary and template of `gguf` (milliseconds, no weights, no context)."""
        from appliance.engine.llama import ContextConfig, LlamaRunner

        return cls(LlamaRunner(ContextConfig(model_path=gguf, vocab_only=True)))
