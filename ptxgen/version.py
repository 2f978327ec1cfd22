"""The package version: a leaf module, so every layer (the PTX header, cache keys) can read
it without importing the package root."""
__version__ = "0.1.0"
