"""The provider contract suite, shipped as a pytest plugin (entry point ``vkprovider`` in ``pytest11``).

An adapter author runs it from their own repository::

    pytest --vkprovider-harness=mypkg.tests.harness:harness

(or sets ``vkprovider_harness = "mypkg.tests.harness:harness"`` in their pytest ini options). The
harness interface is :class:`vkprovider.contract.harness.Harness`; the tests are
:mod:`vkprovider.contract.suite`; the fixtures that build the provider in each transport variant
are :mod:`vkprovider.contract.fixtures`. See docs/plugin-guide.md.
"""
