"""Entry-point registry for in-process adapters (filled in by the plugin-contract work)."""
