"""SASS of the bench's copy kernels: what each variant becomes on sm_90a, counted.

Builds the kernels `ptxgen bench copy` times, assembles them with nvJitLink and
disassembles with nvdisasm (the nvidia-cuda-nvdisasm wheel or a CUDA toolkit), then counts
the memory and barrier instructions of each kernel body: the evidence for the discussion in
benchmarks/RESULTS.md.  CPU only.

    python benchmarks/copy_sass.py [--show KERNEL]
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

from ptxgen.bench import copy_kernels as ck  # noqa: E402
from ptxgen.cli import find_nvdisasm  # noqa: E402

ARCH = "sm_90a"
CLASSES = re.compile(r"\b(LDSM|STSM|LDGSTS|LDG|STG|LDS|STS|BAR|UBLKCP|SYNCS|BRA|"
                     r"MEMBAR)\b(\.[A-Z0-9_.]+)?")


def kernels():
    import grid_stride_copy as g

    yield "grid_stride (f32 words, 4 KiB/CTA)", g.make(name="gs_u1")
    yield "grid_stride UNROLL=4 (16 KiB/CTA)", g.make(unroll=4, name="gs_u4")
    yield "reg f32 cta 32x32 (4 KiB)", ck.register_copy_kernel("float32", "cta", (32, 32), 4)[0]
    yield "reg f16 cta 64x64 (8 KiB)", ck.register_copy_kernel("float16", "cta", (64, 64), 8)[0]
    yield "vec_64b f16 cta 64x64", ck.forced_vec_copy_kernel("float16", "cta", (64, 64), 64)[0]
    yield "vec_16b f16 cta 64x64", ck.forced_vec_copy_kernel("float16", "cta", (64, 64), 16)[0]
    yield "vec_auto g2s2g f16 cta 32x64", ck.streaming_copy_kernel("float16", "cta", (32, 64))[0]
    yield "vec_auto g2s2g f16 cta 32x32", ck.streaming_copy_kernel("float16", "cta", (32, 32))[0]
    yield "fallback g2s2g f16 cta 64x64", ck.streaming_copy_kernel("float16", "cta", (64, 64),
                                                                   "fallback")[0]
    yield "ldstmatrix f16 cta 64x64", ck.ldstmatrix_copy_kernel("float16", "cta", (64, 64))[0]
    yield "bulk f16 32x32 (2 KiB)", ck.bulk_copy_kernel("float16", (32, 32))[0]


def sass(kernel, nvdisasm):
    res = kernel.compile(ARCH)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(res.cubin)
    try:
        out = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True,
                             check=True).stdout
    finally:
        os.unlink(f.name)
    return res, out


def main(argv):
    import warnings

    warnings.simplefilter("ignore")
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        sys.exit("copy_sass: needs nvdisasm (pip install nvidia-cuda-nvdisasm)")
    show = argv[argv.index("--show") + 1] if "--show" in argv else None
    print(f"{'kernel':38s} {'regs':>4s}  instructions (count)")
    for label, k in kernels():
        res, text = sass(k, nvdisasm)
        counts = collections.Counter(m.group(0) for m in CLASSES.finditer(text))
        desc = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
        print(f"{label:38s} {res.registers:4d}  {desc}")
        if show and show in label:
            print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
