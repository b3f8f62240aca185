"""``coba serve``: an OpenAI-compatible HTTP endpoint that answers every chat request with a routing policy.

- ``config``: what is fixed at start (endpoints, the policies a request may pick, every limit);
- ``request``: a chat-completions request body -> a checked ``ServedRequest`` (or an ``ApiError``);
- ``engine``: the one adapter to the live env, the policy registry and the pool records (answer one request
  with one policy over the endpoints -> answer, path, usage, episode records), with its helper
  ``served_source`` (the live path's ``EndpointSource`` for a server); ``gates``: calls in flight per endpoint;
- ``jobs``: the bounded queue and the worker threads that run episodes (429 when full, cancel on disconnect);
- ``record``: ``--record DIR`` (canonical JSONL that ``coba pools import`` reads, one whole request per write);
- ``responses``: OpenAI-shaped completions, stream chunks and errors;
- ``app``: the Starlette application (routes, API key, body limit).

The command (``coba_cli/serve_cmd.py``) only parses options and calls ``app.serve``. docs/SERVE.md.
"""
