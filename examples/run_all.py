"""Dump every example kernel to out/<arch>/<kernel>.ptx for sm_80, sm_90a and sm_100a, and on a
machine with a CUDA GPU also run each example and compare with numpy bit for bit."""
import importlib
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

EXAMPLES = ["smem_demo", "dyn_arena", "phase_loop", "let_scalar", "add_one", "grid_stride_copy",
            "smem_pool_demo", "pool_sm100", "gemm_sm100", "gemm_sm80", "async_copy", "rmsnorm",
            "softmax", "gemm_sm90", "attention"]
ARCHS = ["sm_80", "sm_90a", "sm_100a"]


def main(out="out"):
    import ptxgen as pg
    from ptxgen.runtime import has_gpu

    warnings.simplefilter("ignore")
    failures = 0
    mods = []
    for name in EXAMPLES:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as e:     # an example needing an optional package
            if (e.name or "").split(".")[0] == "ptxgen":
                raise                        # ptxgen itself (an older one on sys.path?)
            continue
    for m in mods:
        kernels = getattr(m, "KERNELS", None) or [v for v in vars(m).values()
                                                  if isinstance(v, pg.Kernel)]
        for k in kernels:
            for arch in ARCHS:
                os.makedirs(os.path.join(out, arch), exist_ok=True)
                try:
                    text = k.ptx(arch)
                except pg.PtxgenError as e:   # e.g. tcgen05 on sm_90a: the arch error
                    print(f"  {arch:8} {k.name}: not for this target: {str(e).splitlines()[0]}")
                    continue
                path = os.path.join(out, arch, f"{k.name}.ptx")
                with open(path, "w") as f:
                    f.write(text)
                print(f"  {arch:8} {path}")
    if not has_gpu():
        print("no CUDA GPU here: PTX written, nothing launched")
        return 0
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "gpu"))
    from _xp import same_bits, xp

    rng = np.random.default_rng(0)
    for m in mods:
        if not hasattr(m, "check"):
            continue
        for label, got, want in m.check(xp, rng):
            ok = same_bits(got if isinstance(got, np.ndarray) else xp.asnumpy(got), want)
            failures += not ok
            print(f"  {'ok   ' if ok else 'WRONG'} {label}")
    print("all examples match numpy" if not failures else f"{failures} example(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
