"""The `veritrail` command line: a thin layer over the public Python API, one module per command."""
