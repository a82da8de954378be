"""The contract suite (``vkprovider.contract``), run against every bundled adapter."""

from vkprovider.contract.suite import *  # noqa: F403
from vkprovider.contract.suite_races import *  # noqa: F403
