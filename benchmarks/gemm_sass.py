"""The SASS of examples/gemm_sm90.py's kernels, by instruction class (CPU only): assembled with
nvJitLink for sm_90a, disassembled with nvdisasm (nvidia-cuda-nvdisasm wheel or a toolkit).
Static counts over the whole kernel: the main loop is the HGMMA / SYNCS / UTMALDG lines.
nvJitLink builds relocatable code, which drops setmaxnreg, so register counts here are capped at
168; the driver's whole-program JIT, which runs them, is checked for 0 local bytes in
tests/gpu/test_gemm_sm90_gpu.py.

    python benchmarks/gemm_sass.py [--show DTYPE]
"""
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

from copy_sass import sass  # noqa: E402

from ptxgen.cli import find_nvdisasm  # noqa: E402

OPCODE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)",
                    re.M)


def main(argv):
    import gemm_sm90 as E

    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        sys.exit("gemm_sass: needs nvdisasm (pip install nvidia-cuda-nvdisasm)")
    show = argv[argv.index("--show") + 1] if "--show" in argv else None
    configs = [("bfloat16", {}), ("float16", {}), ("float8_e4m3fn", dict(scaled=True)),
               ("float8_e4m3fn", dict(scaled=True, BN=128, STAGES=5, promote=1))]
    for dt, kw in configs:
        k = E.make_gemm(dt, **kw)
        res, text = sass(k, nvdisasm)
        ops = collections.Counter(m.group(1).split(".")[0] for m in OPCODE.finditer(text))
        total = sum(ops.values())
        print(f"{k.name}: {res.registers} registers, {res.spill_bytes} spill bytes, "
              f"{total} SASS instructions")
        print("   " + ", ".join(f"{op} {n}" for op, n in ops.most_common()))
        if show == dt:
            print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
