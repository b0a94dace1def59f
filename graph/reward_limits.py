"""Default limits of the HTTP reward service (`raa serve-reward`, graph/reward_service.py).

One home for the numbers that both the CLI options (graph/serve_command.py) and ``create_reward_app`` default to:
they were written twice and could drift apart. This module imports nothing, so the CLI can read it without
loading FastAPI."""

DEFAULT_MAX_CONCURRENCY = 16
"""Agent runs in flight over all requests together (``--concurrency``)."""
DEFAULT_MAX_ITEMS = 1024
"""Most clips in one request (``--max-items``); a larger batch is a 400."""
DEFAULT_MAX_BODY_MB = 2048.0
"""Largest request body, MiB (``--max-body-mb``); a larger one is a 413."""
