"""Everything of `ajet serve`: the app and its entry point (`app`), `/v1/completions` (`completions`), the
chat endpoint (`chat`), runtime LoRA loading (`lora`), the API key (`auth`), Prometheus metrics
(`metrics`), and an in-process endpoint for a local model (`local`), which `ajet eval --benchmark bfcl`
and the chat-API evaluation use."""
