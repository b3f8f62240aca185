"""The OpenAI-compatible model client: endpoints, calls, prompts and judge calls (what a live run needs)."""
