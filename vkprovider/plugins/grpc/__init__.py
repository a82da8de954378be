"""Out-of-process plugins over gRPC."""
