"""Code generated from this package's .proto files by the build (setup.py); not committed."""
