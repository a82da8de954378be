"""pods."""
