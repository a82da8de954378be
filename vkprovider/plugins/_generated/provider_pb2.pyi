import datetime

from google.protobuf import any_pb2 as _any_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PHASE_UNSPECIFIED: _ClassVar[Phase]
    PHASE_PENDING: _ClassVar[Phase]
    PHASE_RUNNING: _ClassVar[Phase]
    PHASE_SUCCEEDED: _ClassVar[Phase]
    PHASE_FAILED: _ClassVar[Phase]
    PHASE_UNKNOWN: _ClassVar[Phase]

class ContainerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTAINER_STATE_UNSPECIFIED: _ClassVar[ContainerState]
    CONTAINER_STATE_WAITING: _ClassVar[ContainerState]
    CONTAINER_STATE_RUNNING: _ClassVar[ContainerState]
    CONTAINER_STATE_TERMINATED: _ClassVar[ContainerState]
PHASE_UNSPECIFIED: Phase
PHASE_PENDING: Phase
PHASE_RUNNING: Phase
PHASE_SUCCEEDED: Phase
PHASE_FAILED: Phase
PHASE_UNKNOWN: Phase
CONTAINER_STATE_UNSPECIFIED: ContainerState
CONTAINER_STATE_WAITING: ContainerState
CONTAINER_STATE_RUNNING: ContainerState
CONTAINER_STATE_TERMINATED: ContainerState

class Capabilities(_message.Message):
    __slots__ = ("logs", "metrics", "update_in_place", "watch", "endpoints", "rate_limit")
    LOGS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_IN_PLACE_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    logs: bool
    metrics: bool
    update_in_place: bool
    watch: bool
    endpoints: bool
    rate_limit: RateLimit
    def __init__(self, logs: _Optional[bool] = ..., metrics: _Optional[bool] = ..., update_in_place: _Optional[bool] = ..., watch: _Optional[bool] = ..., endpoints: _Optional[bool] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ...) -> None: ...

class RateLimit(_message.Message):
    __slots__ = ("per_second", "burst")
    PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    per_second: float
    burst: int
    def __init__(self, per_second: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class ProviderInfo(_message.Message):
    __slots__ = ("name", "adapter", "version", "capabilities")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    adapter: str
    version: str
    capabilities: Capabilities
    def __init__(self, name: _Optional[str] = ..., adapter: _Optional[str] = ..., version: _Optional[str] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ...) -> None: ...

class Offer(_message.Message):
    __slots__ = ("provider", "offer_id", "gpu_type", "gpu_count", "gpu_memory_gb", "region", "price_per_hour", "capacity", "spot", "cpu", "memory_gb")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    provider: str
    offer_id: str
    gpu_type: str
    gpu_count: int
    gpu_memory_gb: float
    region: str
    price_per_hour: float
    capacity: int
    spot: bool
    cpu: float
    memory_gb: float
    def __init__(self, provider: _Optional[str] = ..., offer_id: _Optional[str] = ..., gpu_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., gpu_memory_gb: _Optional[float] = ..., region: _Optional[str] = ..., price_per_hour: _Optional[float] = ..., capacity: _Optional[int] = ..., spot: _Optional[bool] = ..., cpu: _Optional[float] = ..., memory_gb: _Optional[float] = ...) -> None: ...

class EnvVar(_message.Message):
    __slots__ = ("name", "value", "secret")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    secret: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., secret: _Optional[bool] = ...) -> None: ...

class Port(_message.Message):
    __slots__ = ("container_port", "protocol", "name")
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    container_port: int
    protocol: str
    name: str
    def __init__(self, container_port: _Optional[int] = ..., protocol: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class FileMount(_message.Message):
    __slots__ = ("path", "content", "mode", "secret")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    mode: int
    secret: bool
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ..., mode: _Optional[int] = ..., secret: _Optional[bool] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "image", "command", "args", "env", "ports", "working_dir", "cpu", "memory_bytes", "files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    ports: _containers.RepeatedCompositeFieldContainer[Port]
    working_dir: str
    cpu: float
    memory_bytes: int
    files: _containers.RepeatedCompositeFieldContainer[FileMount]
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., ports: _Optional[_Iterable[_Union[Port, _Mapping]]] = ..., working_dir: _Optional[str] = ..., cpu: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., files: _Optional[_Iterable[_Union[FileMount, _Mapping]]] = ...) -> None: ...

class RegistryCredential(_message.Message):
    __slots__ = ("server", "username", "password")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    server: str
    username: str
    password: str
    def __init__(self, server: _Optional[str] = ..., username: _Optional[str] = ..., password: _Optional[str] = ...) -> None: ...

class DeploymentRequest(_message.Message):
    __slots__ = ("uid", "namespace", "name", "node_name", "containers", "init_containers", "gpu_type", "gpu_count", "gpu_memory_gb", "offer_id", "region", "spot", "restart_policy", "registry_credentials", "labels", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    namespace: str
    name: str
    node_name: str
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    init_containers: _containers.RepeatedCompositeFieldContainer[Container]
    gpu_type: str
    gpu_count: int
    gpu_memory_gb: float
    offer_id: str
    region: str
    spot: bool
    restart_policy: str
    registry_credentials: _containers.RepeatedCompositeFieldContainer[RegistryCredential]
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., node_name: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., gpu_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., gpu_memory_gb: _Optional[float] = ..., offer_id: _Optional[str] = ..., region: _Optional[str] = ..., spot: _Optional[bool] = ..., restart_policy: _Optional[str] = ..., registry_credentials: _Optional[_Iterable[_Union[RegistryCredential, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("name", "state", "ready", "restart_count", "reason", "message", "exit_code", "started_at", "finished_at", "image")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: ContainerState
    ready: bool
    restart_count: int
    reason: str
    message: str
    exit_code: int
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    image: str
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[ContainerState, str]] = ..., ready: _Optional[bool] = ..., restart_count: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., exit_code: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., image: _Optional[str] = ...) -> None: ...

class DeploymentStatus(_message.Message):
    __slots__ = ("uid", "phase", "ready", "node_name", "provider_id", "offer_id", "ip", "endpoint", "reason", "message", "started_at", "containers", "price_per_hour", "endpoints")
    UID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    IP_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    phase: Phase
    ready: bool
    node_name: str
    provider_id: str
    offer_id: str
    ip: str
    endpoint: str
    reason: str
    message: str
    started_at: _timestamp_pb2.Timestamp
    containers: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    price_per_hour: float
    endpoints: DeploymentEndpoints
    def __init__(self, uid: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., ready: _Optional[bool] = ..., node_name: _Optional[str] = ..., provider_id: _Optional[str] = ..., offer_id: _Optional[str] = ..., ip: _Optional[str] = ..., endpoint: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., containers: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., price_per_hour: _Optional[float] = ..., endpoints: _Optional[_Union[DeploymentEndpoints, _Mapping]] = ...) -> None: ...

class LogOptions(_message.Message):
    __slots__ = ("container", "follow", "tail_lines", "since_seconds", "limit_bytes", "timestamps")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    SINCE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    container: str
    follow: bool
    tail_lines: int
    since_seconds: int
    limit_bytes: int
    timestamps: bool
    def __init__(self, container: _Optional[str] = ..., follow: _Optional[bool] = ..., tail_lines: _Optional[int] = ..., since_seconds: _Optional[int] = ..., limit_bytes: _Optional[int] = ..., timestamps: _Optional[bool] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: ProviderInfo
    def __init__(self, info: _Optional[_Union[ProviderInfo, _Mapping]] = ...) -> None: ...

class ProbeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProbeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OffersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OffersResponse(_message.Message):
    __slots__ = ("offers",)
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    offers: _containers.RepeatedCompositeFieldContainer[Offer]
    def __init__(self, offers: _Optional[_Iterable[_Union[Offer, _Mapping]]] = ...) -> None: ...

class DeployRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: DeploymentRequest
    def __init__(self, request: _Optional[_Union[DeploymentRequest, _Mapping]] = ...) -> None: ...

class DeployResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: DeploymentStatus
    def __init__(self, status: _Optional[_Union[DeploymentStatus, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: DeploymentStatus
    def __init__(self, status: _Optional[_Union[DeploymentStatus, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("node_name",)
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    def __init__(self, node_name: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("statuses",)
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedCompositeFieldContainer[DeploymentStatus]
    def __init__(self, statuses: _Optional[_Iterable[_Union[DeploymentStatus, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("uid", "grace_period_seconds")
    UID_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    grace_period_seconds: float
    def __init__(self, uid: _Optional[str] = ..., grace_period_seconds: _Optional[float] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("gone",)
    GONE_FIELD_NUMBER: _ClassVar[int]
    gone: bool
    def __init__(self, gone: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("node_name",)
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    def __init__(self, node_name: _Optional[str] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: DeploymentStatus
    def __init__(self, status: _Optional[_Union[DeploymentStatus, _Mapping]] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("uid", "options")
    UID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    options: LogOptions
    def __init__(self, uid: _Optional[str] = ..., options: _Optional[_Union[LogOptions, _Mapping]] = ...) -> None: ...

class LogsResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class UsageRequest(_message.Message):
    __slots__ = ("node_name",)
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    def __init__(self, node_name: _Optional[str] = ...) -> None: ...

class UsageResponse(_message.Message):
    __slots__ = ("usage",)
    USAGE_FIELD_NUMBER: _ClassVar[int]
    usage: _containers.RepeatedCompositeFieldContainer[DeploymentUsage]
    def __init__(self, usage: _Optional[_Iterable[_Union[DeploymentUsage, _Mapping]]] = ...) -> None: ...

class ContainerUsage(_message.Message):
    __slots__ = ("name", "cpu_seconds_total", "cpu_cores", "memory_working_set_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WORKING_SET_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    cpu_seconds_total: float
    cpu_cores: float
    memory_working_set_bytes: int
    def __init__(self, name: _Optional[str] = ..., cpu_seconds_total: _Optional[float] = ..., cpu_cores: _Optional[float] = ..., memory_working_set_bytes: _Optional[int] = ...) -> None: ...

class DeploymentUsage(_message.Message):
    __slots__ = ("uid", "timestamp", "containers")
    UID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    timestamp: _timestamp_pb2.Timestamp
    containers: _containers.RepeatedCompositeFieldContainer[ContainerUsage]
    def __init__(self, uid: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., containers: _Optional[_Iterable[_Union[ContainerUsage, _Mapping]]] = ...) -> None: ...

class EndpointsRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class EndpointsResponse(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: DeploymentEndpoints
    def __init__(self, endpoints: _Optional[_Union[DeploymentEndpoints, _Mapping]] = ...) -> None: ...

class PortMapping(_message.Message):
    __slots__ = ("container_port", "protocol", "port")
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    container_port: int
    protocol: str
    port: int
    def __init__(self, container_port: _Optional[int] = ..., protocol: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class DeploymentEndpoints(_message.Message):
    __slots__ = ("uid", "addresses", "ports")
    UID_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    ports: _containers.RepeatedCompositeFieldContainer[PortMapping]
    def __init__(self, uid: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ..., ports: _Optional[_Iterable[_Union[PortMapping, _Mapping]]] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("code", "message", "retry_after_seconds", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    retry_after_seconds: float
    reason: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., retry_after_seconds: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class RpcStatus(_message.Message):
    __slots__ = ("code", "message", "details")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    details: _containers.RepeatedCompositeFieldContainer[_any_pb2.Any]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[_Iterable[_Union[_any_pb2.Any, _Mapping]]] = ...) -> None: ...
