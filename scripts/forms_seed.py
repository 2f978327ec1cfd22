"""Write ptxgen/target/forms_seed.txt: the instruction form texts the project's own kernels use,
rendered from templates/ with jinja, which the package ships so that a build with an empty
disk cache renders nothing (see ptxgen/target/forms.py).

    python scripts/forms_seed.py

Run it after changing templates/ or ptxgen/target/forms.py (either changes the cache key, and
a seed made for another key is ignored: correct, only slower).  It builds what
scripts/ptx_hashes.py builds (every example for sm_80/sm_90a/sm_100a, the tile copies, every
`ptxgen bench copy` config) and an elementwise kernel with a scalar parameter of each scalar
type, with the disk cache off and the old seed removed, so every text comes from the templates.
"""
import contextlib
import io
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts")]


def elementwise():
    """out[i] = x[i] * s + s under i < N, per scalar type and arch (what benchmarks/cold_start.py
    and the simplest user kernels emit: parameters, compares, branches, the arithmetic)."""
    import ptxgen as pg

    N = pg.var("N")
    for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
               "float16", "bfloat16", "float32", "float64"):
        st = getattr(pg, dt)

        @pg.kernel(grid=lambda a: ((a["N"] + 255) // 256,), block=(256,))
        def ew(out: pg.Tensor((N,), dt), x: pg.Tensor((N,), dt), s: st):
            i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
            with pg.if_(i < N):
                out[i] = x[i] * s + s

        for arch in ("sm_80", "sm_90a", "sm_100a"):
            try:
                ew.ptx(arch)
            except Exception:   # a type an arch lacks: its forms are not needed there
                pass


def main():
    os.environ["PTXGEN_DISK_CACHE"] = "0"
    from ptxgen.target import forms

    if os.path.exists(forms.SEED):
        os.unlink(forms.SEED)
    import ptx_hashes

    with contextlib.redirect_stdout(io.StringIO()):
        ptx_hashes.main()
    elementwise()
    texts = dict(forms._disk.texts or {})
    data = forms.encode(forms.cache_key(), texts)
    with open(forms.SEED, "wb") as f:
        f.write(data)
    print(f"{forms.SEED}: {len(texts)} texts, {len(data)} bytes, key {forms.cache_key()[:16]}")


if __name__ == "__main__":
    main()
