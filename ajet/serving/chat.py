"""`POST /v1/chat/completions` of `ajet serve`: the training gateway's chat endpoint (the same chat
rendering, tool-call parsing, request checks and OpenAI errors) in keyless mode, with the request's
`model` routed as completions routes it: the served name (or an alias, or none) is the model as it
is, a loaded LoRA adapter's name runs with that adapter, and any other name gets 404
`model_not_found`, as vLLM answers.
"""

from __future__ import annotations

from typing import Any

from ajet.gateway.chat_request import ChatRequest
from ajet.gateway.server import Gateway
from ajet.serving.lora import LoraAdapters


class ServeChat(Gateway):
    """A keyless gateway whose requests name the base model or a loaded adapter (`lora`)."""

    def __init__(self, engine: Any, tokenizer: Any, lora: LoraAdapters | None = None, **kwargs: Any) -> None:
        super().__init__(engine, tokenizer, require_key=False, **kwargs)
        self.lora = lora

    def _adapter(self, chat: ChatRequest) -> str | None:
        return None if self.lora is None else self.lora.adapter_for(chat.model)
