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

from pools.ray_connect import RAY_MISSING, RayUnavailable, connect_ray

__all__ = ["RAY_MISSING", "RayUnavailable", "cluster_cpus", "connect_ray", "map_tasks"]

T = TypeVar("T")
R = TypeVar("R")

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
