"""Connecting to a Ray cluster named by ``--ray-address``: one line when Ray is missing or nothing answers.

In ``pools`` (the lowest layer) because both the Ray Data generation path (``pools.generation``) and the
generic task map (``coba_env.parallel``) connect through it.
"""

from __future__ import annotations

from typing import Any

#: The line shown when ``--ray-address`` is given but Ray is not installed.
RAY_MISSING = "--ray-address needs Ray, which is not installed: install coba-env[ray] (pip install -e '.[ray]' in the checkout)"


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster at the given address cannot be reached (the CLI exits 2)."""


def connect_ray(address: str) -> Any:
    """The ``ray`` module, connected to the cluster at ``address`` (reusing a connection to it if this process
    has one); raises ``RayUnavailable`` when Ray is missing or the cluster does not answer."""
    if not isinstance(address, str) or not address.strip():
        raise RayUnavailable(f"--ray-address {address!r}: expected a Ray cluster address such as 10.0.0.5:6379, "
                             "ray://HOST:10001, 'auto' or 'local'")
    try:
        import ray
    except ModuleNotFoundError:
        raise RayUnavailable(RAY_MISSING) from None
    address = address.strip()
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address in ("auto", "local", current):
            return ray
        ray.shutdown()  # connected elsewhere: the caller named another cluster
    unreachable = _unreachable(address)
    if unreachable:
        raise RayUnavailable(f"cannot connect to the Ray cluster at --ray-address {address!r}: {unreachable}")
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise RayUnavailable(f"cannot connect to the Ray cluster at --ray-address {address!r}: {first}") from None
    return ray


def _unreachable(address: str, timeout: float = 5.0) -> str:
    """Why nothing answers on ``address``'s HOST:PORT (empty when something does, or for 'auto'/'local').

    ``ray.init`` retries an address where nothing listens for minutes; one TCP probe says it at once. Ray
    serves a loopback address on the machine's own address, so that one is probed too."""
    import socket

    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return ""  # 'auto', 'local' or a form Ray resolves itself
    hosts = [host.strip("[]")]
    if hosts[0] in ("127.0.0.1", "localhost", "::1"):
        try:
            hosts.append(socket.gethostbyname(socket.gethostname()))
        except OSError:
            pass
    for candidate in hosts:
        try:
            with socket.create_connection((candidate, int(port)), timeout=timeout):
                return ""
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    return f"nothing answers on {target} ({reason})"
