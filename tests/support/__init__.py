"""Helpers shared by the test files: the PTX interpreter (ptxsim*), nvJitLink assembly
(asm), the kernels both the CPU and the GPU suites run (*_cases), the tile-math reference
(tilemath_ref) and the exact located-error check (located).  tests/ is on sys.path through
pytest (tests/conftest.py is a rootdir conftest), so these import as `support.x`."""
