"""Render a GGUF's own chat template (Jinja2, sandboxed), or ChatML when the model has none."""

from __future__ import annotations

import logging
from datetime import datetime

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from appliance.errors import ApplianceError

log = logging.getLogger("appliance.engine")

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_ROLES = {"system", "user", "assistant", "tool"}


class ChatTemplateError(ApplianceError):
    """Messages could not be rendered with the model's template."""


def _raise(message: str) -> None:
    raise ChatTemplateError(f"chat template refused the messages: {message}")


class ChatTemplate:
    """Turns OpenAI-style messages into the prompt text the model was trained on."""

    def __init__(self, template: str | None, bos_token: str = "", eos_token: str = "") -> None:
        if not template:
            log.warning("model has no chat template; falling back to ChatML")
        self.source = template or CHATML
        self.is_fallback = not template
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(self.source)
        except TemplateError as e:
            log.warning("model chat template does not compile (%s); falling back to ChatML", e)
            self._template = env.from_string(CHATML)
            self.is_fallback = True
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The prompt for `messages`, ending with the assistant's turn opener."""
        for m in messages:
            if m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                raise ChatTemplateError(f"invalid message {str(m)[:80]!r}: need a role in "
                                        f"{sorted(_ROLES)} and string content")
        try:
            return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except ChatTemplateError:
            raise
        except TemplateError as e:
            raise ChatTemplateError(f"chat template failed: {e}") from None
