"""A local Ray cluster for the Ray tests: one per test module, small, on this machine only.

``ray_address`` starts ``ray.init(address="local")`` with 2 CPUs, a 150 MB object store and no dashboard, and
yields the cluster's GCS address (HOST:PORT), which ``--ray-address`` / ``ray_address=`` then name: in this
process ``coba_env.parallel.connect_ray`` reuses the connection to that address; a ``coba`` subprocess connects
to it by address as it would to a remote cluster. Token authentication is switched off (``RAY_AUTH_MODE``) so
that such a subprocess connects without a token. Ray 2.60 never binds a node to loopback: it replaces
127.0.0.1 by the machine's own address (``ray._private.services.resolve_ip_for_localhost``), so the cluster
listens there, on this machine, and is reached from this machine only by the tests.
The cluster stops when the module's tests end (Ray's threads must not outlive the module: later tests fork).

Ray is the ``ray`` extra; when it is missing the fixture fails saying what to install (never skipped).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Environment the cluster (and its worker processes, which inherit it) runs with.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module", name="ray_address")
def ray_address_fixture() -> Iterator[str]:
    """The GCS address of a local 2-CPU Ray cluster started for this module."""
    if importlib.util.find_spec("ray") is None:
        pytest.fail("ray is not installed: install the ray extra, pip install -e '.[ray]' (scripts/test.sh does)",
                    pytrace=False)
    import ray

    saved = {k: os.environ.get(k) for k in [*RAY_ENV, "PYTHONPATH"]}
    os.environ.update(RAY_ENV)
    # Workers import the project from this checkout (as an installed package would be found on a real cluster).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"]) if p)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=150 * 1024**2,
             log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def subprocess_env() -> dict[str, str]:
    """Environment for a ``coba`` subprocess that connects to the fixture's cluster."""
    env = dict(os.environ)
    env.update(RAY_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env
