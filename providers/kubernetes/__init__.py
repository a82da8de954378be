"""vkprovider adapter: kubernetes."""
