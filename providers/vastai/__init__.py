"""vkprovider adapter: vastai."""
