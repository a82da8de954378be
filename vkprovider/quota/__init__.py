"""Keep Kueue ClusterQueues' quota equal to what the healthy local nodes offer (docs/kueue.md)."""
