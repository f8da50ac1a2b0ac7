"""The OpenAI-compatible gateway between a workflow and the engine."""

from ajet.gateway.server import Gateway, GatewayServer, create_app

__all__ = ["Gateway", "GatewayServer", "create_app"]
