"""The `pigeonhole` command line."""
