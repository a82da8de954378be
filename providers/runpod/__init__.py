"""vkprovider adapter: runpod."""
