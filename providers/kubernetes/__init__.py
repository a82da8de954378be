"""vkprovider adapter: kubernetes (runs pods on a remote cluster reached by a kubeconfig)."""

__version__ = "0.1.0"
