"""The Ray executor: ingest batches and store units as Ray tasks, on a local Ray instance or an existing cluster.

A task is all a worker gets (a module-level function and a picklable task), its intermediate parts are files under
the stage's folder or the parts location (pipeline.core.parts), and the merge orders everything by full keys: the
outputs are the bytes the local executor writes, on any number of nodes. Ray is an optional dependency (`pip install
'telemetry-bench[ray]'`).

Resources map onto Ray as follows. A local instance gets `workers` CPUs, an object store of an eighth of the memory
budget (at least Ray's 80 MB floor; results are small, parts are files) and a short temporary folder (Ray's socket
paths must fit in 107 bytes). Each task requests one CPU and its share of the budget as Ray `memory`, so Ray runs no
more at once than the budget holds. A task whose worker dies is retried by Ray (`max_retries`); a task that raises is
not, and its error stops the build as the local executor's would.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from pipeline.core.allocator import WORKER_THREADS, collect_less, tune_allocator, worker_environment
from pipeline.core.errors import ConfigError, StageError
from pipeline.core.extras import optional
from pipeline.core.progress import track
from pipeline.core.resources import Resources, polars_threads

T = TypeVar("T")
R = TypeVar("R")

MAX_RETRIES = 3  # attempts after a worker dies (killed, out of memory, node lost)
OBJECT_STORE_FLOOR = 80 << 20
# Fault injection for tests: the first task to run in a worker that finds this file absent creates it and kills its
# own worker, as a crash or the kernel's OOM killer would.
KILL_ONCE_ENV = "TELEMETRY_BENCH_RAY_KILL_ONCE"

_lock = threading.Lock()


def _ray():
    return optional("ray", "--executor ray", otherwise="or run with --executor local")


def session(resources: Resources):
    """The Ray module, connected: to `resources.ray_address` when given, else to a local instance started once per
    process (Ray already initialised by the caller is used as it is)."""
    ray = _ray()
    with _lock:
        if ray.is_initialized():
            return ray
        common = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if resources.ray_address:
            try:
                ray.init(address=resources.ray_address, **common)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(
                    f"cannot connect to the Ray cluster at {resources.ray_address!r} ({exc}); start it (ray start "
                    "--head) or fix --ray-address"
                ) from exc
            atexit.register(ray.shutdown)
        else:
            folder = tempfile.mkdtemp(prefix="tbray", dir="/tmp" if os.path.isdir("/tmp") else None)
            ray.init(
                num_cpus=resources.worker_count,
                object_store_memory=max(OBJECT_STORE_FLOOR, resources.memory_budget // 8),
                _temp_dir=folder,
                **common,
            )
            atexit.register(shutil.rmtree, folder, ignore_errors=True)  # runs after ray.shutdown (last in, first out)
            atexit.register(ray.shutdown)
    return ray


def _call(fn: Callable[[T], R], task: T) -> R:
    """One task in a Ray worker."""
    marker = os.environ.get(KILL_ONCE_ENV)
    if marker:
        try:
            with open(marker, "x"):
                pass
        except FileExistsError:
            pass
        else:
            os._exit(137)
    tune_allocator()
    collect_less()
    return fn(task)


def run_on_ray(fn: Callable[[T], R], tasks: Sequence[T], resources: Resources, description: str) -> Iterator[R]:
    """fn over tasks as Ray tasks, results in task order as soon as each is ready."""
    if not tasks:
        return
    ray = session(resources)
    cluster = ray.cluster_resources()
    busy = min(len(tasks), max(1, int(cluster.get("CPU", resources.worker_count))))
    # A task's memory request is its share of the budget, never more than the cluster has (it would never start).
    memory = min(resources.per_worker(busy), int(cluster.get("memory", resources.memory_budget)))
    env = {"POLARS_MAX_THREADS": polars_threads(busy), WORKER_THREADS: polars_threads(busy), **worker_environment()}
    if os.environ.get(KILL_ONCE_ENV):
        env[KILL_ONCE_ENV] = os.environ[KILL_ONCE_ENV]
    remote = ray.remote(_call).options(
        num_cpus=1,
        memory=max(1, memory),
        max_retries=MAX_RETRIES,
        retry_exceptions=False,
        runtime_env={"env_vars": env},
    )
    refs = [remote.remote(fn, task) for task in tasks]
    try:
        for ref in track(refs, description):
            try:
                yield ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # the task raised: its own error, as the local executor's
                raise exc.as_instanceof_cause() from None
            except ray.exceptions.RayError as exc:  # the worker or its node died more than MAX_RETRIES times
                raise StageError(
                    f"{description}: a Ray task failed {MAX_RETRIES + 1} times ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); a worker out of memory is the usual "
                    "cause: lower --memory-budget per worker or give the nodes more memory"
                ) from exc
    except BaseException:
        for ref in refs:
            ray.cancel(ref)
        raise
