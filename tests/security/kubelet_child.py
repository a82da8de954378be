"""The real kubelet app behind the real server, in a child process of its own, so its memory
(``/proc/<pid>/status``) is the server's alone while a test or bench attacks it from outside.

    python -m tests.security.kubelet_child <directory> '<ServerLimits JSON>'

It writes a CA and a serving certificate for 127.0.0.1 into ``directory``, prints the port on
the first line of stdout, and serves until its stdin is closed (or it gets SIGTERM).
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vkprovider.devcluster import pki
from vkprovider.http.auth import Authenticator
from vkprovider.http.kubelet import create_kubelet_app, server_tls
from vkprovider.http.limits import ServerLimits
from vkprovider.http.server import AsgiServer


@dataclass
class _NoPods:
    node_name: str = "vk"
    cache: dict[str, Any] = field(default_factory=dict)
    tracker: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, Any] = field(default_factory=dict)

    @property
    def informer(self) -> Any:
        return self


async def serve(directory: Path, limits: ServerLimits) -> None:
    ca = pki.CertificateAuthority.create(directory)
    serving = ca.issue(directory, "serving", "vk", server=True, ip_addresses=("127.0.0.1",))
    app = create_kubelet_app(_NoPods(), Authenticator(None, "vk"))
    tls = server_tls(str(serving.cert), str(serving.key), str(ca.pair.cert))
    server = AsgiServer(app, "127.0.0.1", 0, ssl_context=tls, limits=limits)
    await server.start()
    print(server.port, flush=True)
    try:
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin
    finally:
        await server.stop()


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), ServerLimits.model_validate(json.loads(sys.argv[2]))))
