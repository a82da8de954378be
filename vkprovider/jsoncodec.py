"""JSON for the service's Kubernetes API traffic: msgspec's codec instead of the standard library's.

Why: every pod's way up and down is JSON at both ends. The apiserver's watch sends each pod in
full (3 to 5 KB) on every change, two events on the way up and three on the way down, and the
service writes a status patch and two Events per pod. Timed inside the running service (the CPU
of each call, 1,000 pods up and down; bench/README.md, *JSON, timed where it runs*),
``json.loads`` took 57 µs per watch event and ``json.dumps`` 21-22 µs per request body: 16-17 %
of the service's CPU per pod, the largest share of any one thing it does. msgspec
(``msgspec.json``, C, no dependencies) took 34-41 µs and 6-8 µs for the same calls.

The same JSON either way, with these differences, none of which the Kubernetes API relies on:

* Decoding is strict: ``NaN``/``Infinity`` literals and non-UTF-8 input are errors (the API
  sends neither); a malformed document raises :data:`DecodeError`, a ``ValueError`` like
  ``json.JSONDecodeError``.
* Encoding writes UTF-8 as is rather than ``\\uXXXX`` escapes, and a float NaN as ``null``; a
  value JSON has no type for raises ``TypeError`` as ``json.dumps`` does, except the types
  msgspec encodes itself (datetimes as RFC 3339, UUIDs, enums by value, dataclasses).

Only the API client's traffic goes through here: configuration files, annotations and the
provider adapters' bodies keep the standard library (small, rare, or the adapter's own choice).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["DecodeError", "decode", "encode"]

#: a malformed document (a subclass of ``ValueError``)
DecodeError = msgspec.DecodeError

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def decode(document: bytes | str) -> Any:
    """The JSON ``document`` as Python objects (dicts, lists, str, int, float, bool, None)."""
    return _decoder.decode(document)


def encode(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8."""
    return _encoder.encode(value)
