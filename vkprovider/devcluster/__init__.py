"""A real local Kubernetes control plane built from source, for tests, the demo and development."""

from vkprovider.devcluster.build import BuildError, Toolchain, build
from vkprovider.devcluster.cluster import Cluster
from vkprovider.devcluster.process import StartupError

__all__ = ["BuildError", "Cluster", "StartupError", "Toolchain", "build"]
