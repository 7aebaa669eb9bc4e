"""Connecting to Ray for a stage (`start_ray`): an address that does not answer, or answers and is no Ray cluster,
and tasks no node can hold, are refused in seconds instead of hanging.

Apart from `executors` because it speaks to the network (a socket, an HTTP/2 preface) and to Ray's API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mathmix.cli_util import first_line

if TYPE_CHECKING:
    from pipelines.executors import ExecutorConfig


def start_ray(config: ExecutorConfig) -> None:
    """Connect to (or start) Ray, failing in seconds where it would hang: an address that does not answer, or
    tasks asking for more CPUs or memory than any node has (Ray waits for such a node forever)."""
    try:
        import ray
    except ImportError:
        raise ValueError("executor.kind ray needs Ray: pip install 'mathmix[ray]'") from None
    if not ray.is_initialized():
        address = config.ray_address
        if address and address != "auto" and ":" in address and not address.startswith("ray://"):
            import socket

            host, _, port = address.rpartition(":")
            try:
                conn = socket.create_connection((host, int(port)), timeout=5)
            except (OSError, ValueError):
                raise ValueError(f"executor.ray_address {address}: nothing answers there") from None
            with conn:
                if not _speaks_grpc(conn):  # ray.init would retry against it without end
                    raise ValueError(
                        f"executor.ray_address {address}: something answers there, but not a Ray cluster (no gRPC: "
                        "give the head's GCS address, by default HOST:6379)"
                    )
        try:
            ray.init(address=address, ignore_reinit_error=True)
        except (ConnectionError, RuntimeError) as err:  # a dead head, an auth token missing: one line, not 40
            raise ValueError(
                f"executor.ray_address {address or '(local)'}: Ray did not connect: {first_line(err)}"
            ) from None
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    need_mem = config.cpus_per_task * config.mem_per_cpu_gb * 2**30
    if nodes and not any(
        r.get("CPU", 0) >= config.cpus_per_task and r.get("memory", 0) >= need_mem for r in nodes
    ):
        biggest = max(nodes, key=lambda r: r.get("CPU", 0))
        raise ValueError(
            f"no Ray node can run a task of cpus_per_task={config.cpus_per_task} and "
            f"{config.cpus_per_task * config.mem_per_cpu_gb:g} GB (largest: {biggest.get('CPU', 0):g} CPUs, "
            f"{biggest.get('memory', 0) / 2**30:.1f} GB)"
        )


def _speaks_grpc(conn: Any, timeout: float = 5.0) -> bool:
    """Whether the peer answers the HTTP/2 connection preface with a SETTINGS frame, as Ray's GCS (gRPC) does.

    Only the TCP port used to be checked, and `ray.init` against another service (slurmctld's port, a web server)
    hung for minutes retrying its GCS connection.
    """
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS
    conn.settimeout(timeout)
    try:
        conn.sendall(preface)
        header = b""
        while len(header) < 9:
            chunk = conn.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except OSError:
        return False
    return header[3] == 4  # frame type 4: SETTINGS
