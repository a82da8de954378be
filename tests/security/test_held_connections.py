"""Attack: hold many half-sent TLS requests against the real kubelet app (issue 21, item 3).

Before the fix every held connection was kept forever, each with its TLS buffers (~280 KiB):
3,000 took the process from 72 to 895 MiB. Now connections are counted before the TLS handshake
(in total and per peer), a connection past a cap is closed at once, and one that has not sent a
complete request in time gets a 408 and is closed. The server runs in a child process so that
its memory is measured alone; every client is a bounded loop on 127.0.0.0/8.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from tests.security.attack import (
    client_context,
    closed_within,
    hold,
    kubelet_child,
    raise_fd_limit,
    still_open,
)

MIB = 1024


def _flood(
    port: int, context: ssl.SSLContext, attempts: int, source: str = "127.0.0.1"
) -> list[ssl.SSLSocket]:
    held = []
    for _ in range(attempts):
        sock = hold(port, context, source)
        if sock is not None:
            held.append(sock)
    return held


def test_rss_stays_bounded_under_two_thousand_half_sent_requests(tmp_path: Path) -> None:
    raise_fd_limit()
    context = client_context()
    # The default caps; a long request timeout so that no slot frees up during the flood.
    with kubelet_child(tmp_path, request_timeout_seconds=600) as child:
        warm = hold(child.port, context)  # one connection through every code path first
        assert warm is not None
        warm.close()
        before = child.rss_kib()
        held = _flood(child.port, context, 2000)
        try:
            grown = child.rss_kib() - before
            still = sum(still_open(s) for s in held)
            print(f"held {len(held)}, RSS grew {grown / MIB:.1f} MiB")
            assert grown < 150 * MIB, f"RSS grew {grown / MIB:.0f} MiB for {len(held)} held connections"
            assert len(held) <= 256 and still <= 256, (len(held), still)  # the per-peer cap
        finally:
            for sock in held:
                sock.close()


def test_connections_past_the_caps_are_closed_at_once(tmp_path: Path) -> None:
    context = client_context()
    with kubelet_child(
        tmp_path, max_connections=8, max_connections_per_peer=4, request_timeout_seconds=600
    ) as child:
        first = _flood(child.port, context, 6, "127.0.0.1")
        second = _flood(child.port, context, 6, "127.0.0.2")
        third = _flood(child.port, context, 3, "127.0.0.3")
        try:
            assert [sum(still_open(s) for s in group) for group in (first, second, third)] == [4, 4, 0]
        finally:
            for sock in first + second:
                sock.close()
        # the slots are free again once the holders are gone
        fresh = hold(child.port, context, "127.0.0.3")
        assert fresh is not None
        fresh.close()


def test_held_requests_and_stalled_handshakes_are_closed_after_their_timeouts(tmp_path: Path) -> None:
    context = client_context()
    with kubelet_child(
        tmp_path,
        max_connections=8,
        max_connections_per_peer=8,
        request_timeout_seconds=1,
        tls_handshake_timeout_seconds=1,
        keep_alive_timeout_seconds=30,  # longer than the request deadline: the deadline closes first
    ) as child:
        half_sent = _flood(child.port, context, 4)
        silent = [socket.create_connection(("127.0.0.1", child.port)) for _ in range(4)]  # no TLS at all
        assert len(half_sent) == 4
        try:
            for sock in half_sent:
                answer = closed_within(sock, 60)
                assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
                assert b"request not complete within 1s" in answer
            for raw in silent:
                assert closed_within(raw, 60) is not None
            # every slot was released: a complete request is served, and the idle keep-alive
            # after it is closed
            tls = hold(child.port, context)
            assert tls is not None
            tls.sendall(b"\r\n\r\n")
            answer = closed_within(tls, 60) or b""
            assert answer.startswith(b"HTTP/1.1 401") and answer.count(b"HTTP/1.1") == 1, answer
            # a keep-alive connection that starts its next request and stalls gets the deadline too
            tls = hold(child.port, context)
            assert tls is not None
            tls.sendall(b"\r\n\r\nGET /pods HTTP/1.1\r\nHost: vk\r\n")
            answer = closed_within(tls, 60) or b""
            assert answer.startswith(b"HTTP/1.1 401") and b"HTTP/1.1 408" in answer, answer
        finally:
            every: list[socket.socket] = [*half_sent, *silent]
            for each in every:
                each.close()
