"""Conversion of the deployment request and log options (host -> plugin direction).

Split from ``convert`` to keep modules small; the same rules apply: every field explicit, values
the models reject raise ``MalformedReply``.
"""

from __future__ import annotations

from vkprovider.models import (
    Container,
    DeploymentRequest,
    EnvVar,
    FileMount,
    LogOptions,
    Port,
    RegistryCredential,
)
from vkprovider.plugins._generated import provider_pb2 as pb
from vkprovider.plugins.grpc.convert import checked


def _container_to_pb(c: Container) -> pb.Container:
    return pb.Container(
        name=c.name,
        image=c.image,
        command=c.command,
        args=c.args,
        env=[pb.EnvVar(name=e.name, value=e.value, secret=e.secret) for e in c.env],
        ports=[pb.Port(container_port=p.container_port, protocol=p.protocol, name=p.name) for p in c.ports],
        working_dir=c.working_dir,
        cpu=c.cpu,
        memory_bytes=c.memory_bytes,
        files=[pb.FileMount(path=f.path, content=f.content, mode=f.mode, secret=f.secret) for f in c.files],
    )


def _container_from_pb(c: pb.Container) -> Container:
    return Container(
        name=c.name,
        image=c.image,
        command=list(c.command),
        args=list(c.args),
        env=[EnvVar(name=e.name, value=e.value, secret=e.secret) for e in c.env],
        ports=[
            Port(container_port=p.container_port, protocol=p.protocol or "TCP", name=p.name) for p in c.ports
        ],
        working_dir=c.working_dir,
        cpu=c.cpu,
        memory_bytes=c.memory_bytes,
        files=[FileMount(path=f.path, content=f.content, mode=f.mode, secret=f.secret) for f in c.files],
    )


def request_to_pb(r: DeploymentRequest) -> pb.DeploymentRequest:
    msg = pb.DeploymentRequest(
        uid=r.uid,
        namespace=r.namespace,
        name=r.name,
        node_name=r.node_name,
        containers=[_container_to_pb(c) for c in r.containers],
        init_containers=[_container_to_pb(c) for c in r.init_containers],
        gpu_count=r.gpu_count,
        gpu_memory_gb=r.gpu_memory_gb,
        spot=r.spot,
        restart_policy=r.restart_policy,
        registry_credentials=[
            pb.RegistryCredential(server=c.server, username=c.username, password=c.password)
            for c in r.registry_credentials
        ],
        labels={**r.labels, **r.tags()},
        annotations=r.annotations,
    )
    if r.gpu_type is not None:
        msg.gpu_type = r.gpu_type
    if r.offer_id is not None:
        msg.offer_id = r.offer_id
    if r.region is not None:
        msg.region = r.region
    return msg


def request_from_pb(m: pb.DeploymentRequest) -> DeploymentRequest:
    return checked(
        lambda: DeploymentRequest(
            uid=m.uid,
            namespace=m.namespace,
            name=m.name,
            node_name=m.node_name,
            containers=[_container_from_pb(c) for c in m.containers],
            init_containers=[_container_from_pb(c) for c in m.init_containers],
            gpu_type=m.gpu_type if m.HasField("gpu_type") else None,
            gpu_count=m.gpu_count,
            gpu_memory_gb=m.gpu_memory_gb,
            offer_id=m.offer_id if m.HasField("offer_id") else None,
            region=m.region if m.HasField("region") else None,
            spot=m.spot,
            restart_policy=m.restart_policy or "Always",
            registry_credentials=[
                RegistryCredential(server=c.server, username=c.username, password=c.password)
                for c in m.registry_credentials
            ],
            labels=dict(m.labels),
            annotations=dict(m.annotations),
        )
    )


def log_options_to_pb(o: LogOptions) -> pb.LogOptions:
    msg = pb.LogOptions(container=o.container, follow=o.follow, timestamps=o.timestamps)
    if o.tail_lines is not None:
        msg.tail_lines = o.tail_lines
    if o.since_seconds is not None:
        msg.since_seconds = o.since_seconds
    if o.limit_bytes is not None:
        msg.limit_bytes = o.limit_bytes
    return msg


def log_options_from_pb(m: pb.LogOptions) -> LogOptions:
    return checked(
        lambda: LogOptions(
            container=m.container,
            follow=m.follow,
            tail_lines=m.tail_lines if m.HasField("tail_lines") else None,
            since_seconds=m.since_seconds if m.HasField("since_seconds") else None,
            limit_bytes=m.limit_bytes if m.HasField("limit_bytes") else None,
            timestamps=m.timestamps,
        )
    )
