"""A complete out-of-process vkprovider plugin whose only contract dependency is the proto file.

It imports nothing from vkprovider: the messages and service come from
``proto/vkprovider/v1/provider.proto`` at start-up (``grpc.protos_and_services``, which needs
grpcio-tools; a plugin in Go/Rust/... generates code from the same file instead). Deployments are
kept in a dict and are "running" at once, which is all a demo needs.

    python docs/examples/minimal_plugin.py     # prints: vkprovider-plugin|1|<address>

Host configuration::

    providers:
      - name: minimal
        grpc: {command: [python, docs/examples/minimal_plugin.py]}
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import uuid
from pathlib import Path

PROTO_DIR = os.environ.get("VKPROVIDER_PROTO_DIR", str(Path(__file__).resolve().parents[2] / "proto"))
# Load the proto under a private top-level name: as ``vkprovider/v1/...`` its generated module
# would be ``vkprovider.v1.provider_pb2``, unimportable wherever vkprovider itself is installed.
_PRIVATE = Path(tempfile.mkdtemp(prefix="minimal-plugin-"))
shutil.copytree(Path(PROTO_DIR) / "vkprovider" / "v1", _PRIVATE / "minimal_plugin_proto")
sys.path.append(str(_PRIVATE))

import grpc  # noqa: E402
from google.protobuf import any_pb2  # noqa: E402
from grpc_health.v1 import health, health_pb2_grpc  # noqa: E402

pb, services = grpc.protos_and_services("minimal_plugin_proto/provider.proto")
shutil.rmtree(_PRIVATE, ignore_errors=True)  # loaded: the copy is no longer needed


async def fail(context, status: grpc.StatusCode, code: str, message: str) -> None:
    """End the RPC with a status plus the typed ErrorDetail in grpc-status-details-bin."""
    detail = any_pb2.Any()
    detail.Pack(pb.ErrorDetail(code=code, message=message))
    rpc_status = pb.RpcStatus(code=status.value[0], message=message, details=[detail])
    await context.abort(
        status, message, trailing_metadata=(("grpc-status-details-bin", rpc_status.SerializeToString()),)
    )


class MinimalProvider(services.ProviderServicer):
    """Implements the unary RPCs; Watch and Logs stay UNIMPLEMENTED (capabilities say so)."""

    def __init__(self) -> None:
        self.deployments: dict[str, object] = {}

    async def GetInfo(self, request, context):
        return pb.GetInfoResponse(info=pb.ProviderInfo(adapter="minimal", version="0.1"))

    async def Probe(self, request, context):
        return pb.ProbeResponse()

    async def Offers(self, request, context):
        offer = pb.Offer(provider="minimal", offer_id="demo", gpu_type="L4-24GB", gpu_count=1, gpu_memory_gb=24,
                         price_per_hour=0.5, capacity=10)  # fmt: skip
        return pb.OffersResponse(offers=[offer])

    async def Deploy(self, request, context):
        r = request.request
        if r.uid not in self.deployments:  # idempotent on the pod UID
            if not r.containers:
                await fail(context, grpc.StatusCode.INVALID_ARGUMENT, "InvalidRequest", "no containers")
            self.deployments[r.uid] = pb.DeploymentStatus(
                uid=r.uid, phase=pb.PHASE_RUNNING, ready=True, node_name=r.node_name,
                provider_id=f"min-{uuid.uuid4().hex[:8]}", offer_id="demo",
            )  # fmt: skip
        return pb.DeployResponse(status=self.deployments[r.uid])

    async def Get(self, request, context):
        if request.uid not in self.deployments:
            await fail(context, grpc.StatusCode.NOT_FOUND, "NotFound", f"no deployment for pod {request.uid}")
        return pb.GetResponse(status=self.deployments[request.uid])

    async def List(self, request, context):
        mine = [s for s in self.deployments.values() if s.node_name == request.node_name]
        return pb.ListResponse(statuses=mine)

    async def Delete(self, request, context):
        self.deployments.pop(request.uid, None)  # deleting an unknown UID succeeds
        return pb.DeleteResponse()


async def main() -> None:
    server = grpc.aio.server()
    services.add_ProviderServicer_to_server(MinimalProvider(), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    address = os.environ.get("VKPROVIDER_PLUGIN_ADDRESS", "127.0.0.1:0")  # the host's suggestion
    port = server.add_insecure_port(address)
    await server.start()
    print(
        f"vkprovider-plugin|1|{address if address.startswith('unix:') else f'127.0.0.1:{port}'}", flush=True
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(5)


if __name__ == "__main__":
    asyncio.run(main())
