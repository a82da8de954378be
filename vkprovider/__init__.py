"""vkprovider: a Virtual Kubelet provider that bursts GPU inference to external GPU clouds."""

__version__ = "0.1.0"
