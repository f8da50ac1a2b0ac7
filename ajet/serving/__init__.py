"""Serving around `ajet serve`: Prometheus metrics (`metrics`) and an in-process endpoint for a local
model (`local`), which `ajet eval --benchmark bfcl` and the chat-API evaluation use."""
