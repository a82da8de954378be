"""Sockets that belong to another network namespace, made from this (host-namespace) process.

A socket belongs to the namespace of the thread that created it, and keeps it for its life,
whatever thread uses it after. ``setns(2)`` moves only the calling thread, so one worker thread
per namespace enters it once and from then on creates sockets there; the event loop then uses
them like any other. This is how the dev cluster's data path listens at replica addresses in
the backends namespace and sends load from the node namespace, without a child process per
listener and without moving the whole process (which still talks to the apiserver on loopback).
Python 3.11 has no ``os.setns``, hence the libc call.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/var/run/netns")


class NetnsSocketError(OSError):
    """The namespace does not exist or this process may not enter it."""


def _enter(netns: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / netns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsSocketError(err, f"setns into {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


class NetnsSockets:
    """Makes sockets inside ``netns`` (a name under /var/run/netns); ``close()`` ends its thread."""

    def __init__(self, netns: str) -> None:
        if not (NETNS_DIR / netns).exists():
            raise NetnsSocketError(2, f"network namespace {netns} does not exist")
        self.netns = netns
        self._pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"netns-{netns}", initializer=_enter, initargs=(netns,)
        )

    async def listener(self, host: str, port: int, *, backlog: int = 512) -> socket.socket:
        """A listening, non-blocking TCP socket bound to ``host:port`` in the namespace."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
                sock.listen(backlog)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            return sock

        return await asyncio.get_running_loop().run_in_executor(self._pool, make)

    async def client(self) -> socket.socket:
        """An unconnected non-blocking TCP socket whose traffic leaves from the namespace."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            return sock

        return await asyncio.get_running_loop().run_in_executor(self._pool, make)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
