"""Hash every PTX module the project emits, to prove a refactor changed no output.

    python scripts/ptx_hashes.py > before.json    # on the old commit (a git worktree)
    python scripts/ptx_hashes.py > after.json     # on the new one
    diff before.json after.json                   # empty: byte-identical PTX

Covers each example kernel for sm_80, sm_90a and sm_100a (or its arch error), the tile
copies of benchmarks/emit_speed.py, and every `ptxgen bench copy` config (built for sm_90a,
no GPU needed).  Used while speeding up emission: every step kept all hashes.
"""
import hashlib
import importlib
import json
import os
import sys
import warnings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "examples"), ROOT, os.path.join(ROOT, "benchmarks")]


def _hash(build):
    try:
        return hashlib.sha1(build().encode()).hexdigest()[:12]
    except Exception as e:   # an expected arch error is part of the output too
        return f"{type(e).__name__}: {str(e)[:80]}"


def main():
    warnings.simplefilter("ignore")
    import emit_speed
    import ptxgen.runtime
    from ptxgen.bench import sweep

    out = {}
    for name, factory in emit_speed.factories():
        for arch in ("sm_80", "sm_90a", "sm_100a"):
            out[f"{name}@{arch}"] = _hash(lambda: factory().ptx(arch))
    for mod in ("gemm_sm100", "pool_sm100", "smem_pool_demo", "wgmma_desc_check", "gemm_sm80",
                "gemm_sm90", "rmsnorm", "softmax", "attention"):   # the last four: ptxgen.kernels
        for k in getattr(importlib.import_module(mod), "KERNELS", []):
            for arch in ("sm_90a", "sm_100a"):
                out[f"{mod}:{k.name}@{arch}"] = _hash(lambda: k.ptx(arch))
    ptxgen.runtime.device_arch = lambda: "sm_90a"     # the bench builders ask the device
    sweep.load_plugins()
    for cfg in sweep.expand(size_bytes=1 << 26):
        def build(cfg=cfg):
            b = sweep._REGISTRY[cfg.variant].builder(cfg)
            ptx = getattr(b, "ptx", None)
            return ptx() if callable(ptx) else ptx if ptx else f"skip: {b}"
        out[cfg.label] = _hash(build)
    json.dump(out, sys.stdout, indent=0, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
