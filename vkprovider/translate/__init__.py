"""translate."""
