"""Each async test here runs on asyncio's loop and on uvloop's (tests/loops.py)."""

from tests.loops import pytest_asyncio_loop_factories

__all__ = ["pytest_asyncio_loop_factories"]
