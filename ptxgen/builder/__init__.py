"""The Python builder: traces a kernel function into the IR."""
