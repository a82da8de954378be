"""A lean HTTP/1.1 client for the service's own short calls: keep-alive connections to one
server, answers parsed by llhttp (``httptools``, the parser uvicorn uses), nothing else.

Why not aiohttp for these: a pod's way up and down is four short API calls (a status patch, an
Event, the final delete, an Event), and aiohttp's per-request machinery (URL objects, cookie
jar, header multidicts, a writer task, timers, the response object and its stream) costs about
twice the CPU of the exchange itself: a POST of an Event measured 333-420 µs of CPU under
aiohttp against 151-179 µs here (bench/README.md, *the lean client*). Watches and log streams
stay on aiohttp: they are few and long, and there its features pay.

What it does, and the rules it keeps (those of Go's ``net/http`` transport where they differ
from "whatever is simplest"):

* One server (``host``, ``port``), TLS or plain TCP; at most ``limit`` exchanges at once, each
  on a connection of its own (no pipelining); idle connections are reused newest first and
  closed after ``keepalive_seconds`` idle.
* An exchange that fails, times out or is cancelled closes its connection: a connection is
  reused only after a complete answer that allows it (``Connection: close`` and HTTP/1.0 do not).
* A **reused** connection the server closed before a byte of the answer arrived (its idle
  timeout raced our request) is retried once on a new connection **only for idempotent
  methods** (GET, HEAD, PUT, DELETE, OPTIONS), as Go does; a POST or PATCH is never sent twice
  by this layer: its caller decides.
* Bounded: answer headers (``max_header_bytes``) and body (``max_body_bytes``, after gzip
  decompression too) beyond the limits fail the exchange with :class:`ProtocolError`; a
  request target or header with CR, LF or NUL is refused before anything is sent.
* Answers delimited by closing the connection (no length, not chunked) are not supported: the
  exchange fails with :class:`Disconnected` (API servers always send a length or chunks).

Failures are :class:`H1Error` subclasses (:class:`Disconnected`, :class:`ProtocolError`),
``OSError`` (connect, TLS) or ``TimeoutError``; callers map them to their own error classes.
"""

from vkprovider.h1._connection import Answer, Disconnected, H1Error, ProtocolError
from vkprovider.h1._pool import IDEMPOTENT, Pool

__all__ = ["IDEMPOTENT", "Answer", "Disconnected", "H1Error", "Pool", "ProtocolError"]
