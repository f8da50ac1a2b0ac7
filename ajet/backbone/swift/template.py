"""swift's chat template `ajet`: ms-swift encodes every training row with ajet's own renderer.

Runs inside swift's process (imported by the run's plugin file). ajet renders conversations with
the model's chat template, or with its Hermes tool rewrite when that template cannot show tools
(`ajet.render.ChatRenderer`); the gateway renders rollouts and `ajet eval` the same way.
If swift rendered the training rows with its own templates, a model fine-tuned on swift would see
one prompt format in training and another at rollout and eval time (for SmolLM2, swift's chatml +
hermes words the tool instructions differently and writes tool results as user turns). So the
swift backbone passes `--template ajet`: this template turns swift's `StdTemplateInputs` (system,
tools, messages with tool_call / tool_response roles) back into OpenAI messages and renders them
with `ChatRenderer.encode_conversation`, the function the debug backbone's SFT uses. Assistant turns
are trained (labels = ids), everything else is masked (-100); a message with `"loss": false` is
masked too (the prompt turns of a DPO row).

The chat template text is the tokenizer's own, or the file named by AJET_SWIFT_CHAT_TEMPLATE (the
run's `model.chat_template`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from swift.template import Template, TemplateMeta, register_template

TEMPLATE_NAME = "ajet"
CHAT_TEMPLATE_ENV = "AJET_SWIFT_CHAT_TEMPLATE"


def openai_messages(system: str | None, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """swift's messages (tool_call / tool_response / tool roles, JSON-string contents) as OpenAI ones."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    pending: list[str] = []
    for n, message in enumerate(messages):
        role, content = message["role"], message.get("content")
        if role == "tool_call":
            call = json.loads(content) if isinstance(content, str) else dict(content)
            arguments = call.get("arguments", {})
            call_id = f"call_{n}"
            pending.append(call_id)
            entry = {"id": call_id, "type": "function", "function": {
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)}}
            if out and out[-1]["role"] == "assistant":
                out[-1].setdefault("tool_calls", []).append(entry)  # parallel calls, or text then a call
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [entry], **_loss(message)})
            continue
        if role in ("tool_response", "tool"):
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            out.append({"role": "tool", "tool_call_id": pending.pop(0) if pending else f"call_{n}", "content": text})
            continue
        out.append({"role": role, "content": content if content is not None else "", **_loss(message)})
    return out


def _loss(message: dict[str, Any]) -> dict[str, Any]:
    return {"loss": False} if message.get("loss") is False else {}


class AjetTemplate(Template):
    """Encodes with ajet's ChatRenderer; see the module docstring."""

    def _ajet_renderer(self):
        renderer = getattr(self, "_ajet_renderer_cache", None)
        if renderer is None:
            from ajet.render import ChatRenderer

            path = os.environ.get(CHAT_TEMPLATE_ENV)
            text = Path(path).read_text(encoding="utf-8") if path else None
            renderer = self._ajet_renderer_cache = ChatRenderer(self.tokenizer, text)
        return renderer

    def _encode(self, inputs) -> dict[str, Any]:
        renderer = self._ajet_renderer()
        messages = openai_messages(inputs.system, inputs.messages)
        tools = [t if isinstance(t, dict) and "function" in t else {"type": "function", "function": t}
                 for t in (inputs.tools or [])] or None
        if messages and messages[-1]["role"] == "assistant" and messages[-1].get("content") is None:
            messages.pop()  # an empty final turn: the prompt of a generation
        if not messages or messages[-1]["role"] != "assistant" or not self.is_training:
            prompt = renderer.encode([_plain(m) for m in messages], tools, add_generation_prompt=True)
            return {"input_ids": prompt.token_ids, "labels": None, "loss_scale": None}
        untrained = {n for n, m in enumerate(m for m in messages if m["role"] == "assistant") if m.get("loss") is False}
        rendered = renderer.encode_conversation([_plain(m) for m in messages], tools)
        input_ids: list[int] = []
        labels: list[int] = []
        turn = 0
        for segment in rendered.segments:
            trained = segment.author == "llm" and turn not in untrained
            if segment.author == "llm":
                turn += 1
            input_ids.extend(segment.token_ids)
            labels.extend(segment.token_ids if trained else [-100] * len(segment.token_ids))
        return {"input_ids": input_ids, "labels": labels, "loss_scale": None}


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "loss"}


def register() -> None:
    """Make `--template ajet` known to swift (idempotent)."""
    register_template(
        TemplateMeta(TEMPLATE_NAME, prefix=[], prompt=["{{QUERY}}"], chat_sep=None, template_cls=AjetTemplate,
                     agent_template="hermes"),
        exist_ok=True)


register()
