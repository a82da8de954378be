"""Moved to :mod:`vkprovider.contract.harness`; kept so ``from harness import Harness`` still works."""

from vkprovider.contract.harness import DelayStats, Harness, Op

__all__ = ["DelayStats", "Harness", "Op"]
