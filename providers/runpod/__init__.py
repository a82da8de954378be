"""vkprovider adapter: runpod (RunPod REST API v2)."""

__version__ = "0.1.0"
