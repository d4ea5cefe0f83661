"""searchd: the gRPC hybrid-search daemon lands with the searchd issue."""
