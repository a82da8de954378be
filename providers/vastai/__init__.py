"""vkprovider adapter: vastai (Vast.ai REST API)."""

__version__ = "0.1.0"
