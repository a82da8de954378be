"""Keep a Kueue ClusterQueue's local-flavor quota equal to what the healthy local nodes offer."""
