"""One generic map: ``map_tasks(fn, items)`` in this process, or as Ray remote tasks on a cluster.

``map_tasks(fn, items, shared=(big, ...), ray_address=ADDR)`` returns ``[fn(item, *shared) for item in items]``
in input order. Without an address it is exactly that loop; with one it connects to the Ray cluster at ``ADDR``
(``ray.init(address=ADDR)``), puts every shared input in the object store once (``ray.put``: a compiled pool is
serialised once, not once per task) and runs one remote task per item. ``fn`` must be importable on the
cluster's workers (a module-level function of an installed package).

Ray is an optional extra (``pip install 'coba-env[ray]'``); without it nothing here imports it, and an address
raises ``RayUnavailable`` with the one line to show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["RAY_MISSING", "RayUnavailable", "cluster_cpus", "connect_ray", "map_tasks"]

T = TypeVar("T")
R = TypeVar("R")

#: The line shown when ``--ray-address`` is given but Ray is not installed.
RAY_MISSING = "--ray-address needs Ray, which is not installed: install coba-env[ray] (pip install 'coba-env[ray]')"


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


def cluster_cpus(ray: Any) -> int:
    """CPUs the connected Ray cluster offers (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _apply(fn: Callable[..., R], item: Any, *shared: Any) -> R:
    """One Ray task: ``fn(item, *shared)``."""
    return fn(item, *shared)


def map_tasks(fn: Callable[..., R], items: Sequence[T], *, shared: Sequence[Any] = (),
              ray_address: str | None = None, num_cpus: float = 1, progress: bool = False,
              desc: str = "tasks") -> list[R]:
    """``[fn(item, *shared) for item in items]`` in input order: here, or as Ray tasks on ``ray_address``.

    On Ray, each ``shared`` value is put in the object store once and every task reads the same copy; each task
    reserves ``num_cpus`` CPUs. An exception raised by ``fn`` in a task is raised here as itself (not wrapped).
    ``progress`` shows a bar over the tasks.
    """
    items = list(items)
    if ray_address is None:
        return [fn(item, *shared) for item in items]
    ray = connect_ray(ray_address)
    refs = [ray.put(value) for value in shared]
    # ``fn`` travels as an argument, so any picklable callable works (ray.remote takes only plain functions,
    # not a functools.partial such as the protocol's fold task).
    remote = ray.remote(num_cpus=num_cpus, max_retries=0)(_apply)
    fn_ref = ray.put(fn)
    futures = [remote.remote(fn_ref, item, *refs) for item in items]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(futures), desc=desc, unit="task", leave=False)
    try:
        pending = list(futures)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            if bar is not None:
                bar.update(len(done))
        return ray.get(futures)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise
    except KeyboardInterrupt:
        for future in futures:
            ray.cancel(future, force=True)
        raise
    finally:
        if bar is not None:
            bar.close()
