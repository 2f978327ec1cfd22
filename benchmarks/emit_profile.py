"""Where one build of a kernel spends its Python bytecodes, per function.

    python benchmarks/emit_profile.py                      # the grid-stride example
    python benchmarks/emit_profile.py "tile.cta.copy 64x64 f16 SW128" 40

Deterministic (sys.settrace opcode events, counted in the frame that runs them), so two
commits can be compared function by function on a noisy machine; wall time cannot be.
Kernel names are those of benchmarks/emit_speed.py.
"""
import collections
import sys
import warnings


def profile(factory, arch="sm_90a"):
    """(ops, calls) Counters keyed by (file, first line, function) for one build."""
    ops, calls = collections.Counter(), collections.Counter()

    def where(code):
        return (code.co_filename.rsplit("ptxgen/", 1)[-1], code.co_firstlineno, code.co_name)

    def local(frame, event, arg):
        if event == "opcode":
            ops[where(frame.f_code)] += 1
        return local

    def new_frame(frame, event, arg):
        frame.f_trace_opcodes = True
        calls[where(frame.f_code)] += 1
        return local

    for _ in range(4):     # warm-up: templates, layout plans: a later build's counts
        factory().ptx(arch)
    sys.settrace(new_frame)
    try:
        factory().ptx(arch)
    finally:
        sys.settrace(None)
    return ops, calls


def bytecodes(factory, arch="sm_90a") -> int:
    """Bytecodes one build executes: the same on every run for the same code and Python."""
    return sum(profile(factory, arch)[0].values())


def main():
    import emit_speed

    warnings.simplefilter("ignore")
    name = sys.argv[1] if len(sys.argv) > 1 else "grid_stride_copy:grid_stride_copy"
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    factories = dict(emit_speed.factories())
    if name not in factories:
        sys.exit(f"unknown kernel {name!r}; one of: {', '.join(factories)}")
    ops, calls = profile(factories[name])
    print(f"{name}: {sum(ops.values())} bytecodes, {sum(calls.values())} Python calls")
    print(f"{'ops':>7} {'calls':>6}  function")
    for key, n in ops.most_common(top):
        print(f"{n:>7} {calls[key]:>6}  {key[0]}:{key[1]} {key[2]}")


if __name__ == "__main__":
    main()
