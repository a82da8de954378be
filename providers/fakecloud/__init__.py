"""vkprovider adapter: fakecloud."""
