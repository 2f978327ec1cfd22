"""Test helper: assemble PTX text with nvJitLink in-process (no system ptxas)."""


def assemble(ptx: str, arch: str) -> tuple[bool, str]:
    # imported here: a test file that only imports this module should not load cuda-bindings
    from cuda.bindings import nvjitlink as nj

    h = nj.create(2, [f"-arch={arch}", "-verbose"])
    try:
        data = ptx.encode()
        try:   # nvJitLink compiles PTX inside add_data; errors surface there or in complete
            nj.add_data(h, nj.InputType.PTX, data, len(data), "k.ptx")
            nj.complete(h)
            ok = True
        except nj.nvJitLinkError:
            ok = False
        n = nj.get_error_log_size(h) if not ok else nj.get_info_log_size(h)
        buf = bytearray(n)
        (nj.get_error_log if not ok else nj.get_info_log)(h, buf)
        return ok, buf.decode(errors="replace")
    finally:
        nj.destroy(h)
