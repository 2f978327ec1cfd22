"""atom and red for tests/support/ptxsim.py (a mixin of Sim); fences are no-ops there.

A thread runs until a barrier before the next one starts, so each atom is one indivisible
read-modify-write in the simulator's schedule: it reads the element's bits, writes the new ones
and (atom) returns the old bits exactly.  Semantics per the PTX ISA (atom): inc stores
`old >= b ? 0 : old + 1`, dec `(old == 0 || old > b) ? b : old - 1`, cas stores c where the
old bits equal b, min/max compare as the type's signedness says; a float add rounds to nearest
even in the element's format (exactly, through ptxsim_math's formats), and .f32 flushes
subnormal inputs and results to a zero of the same sign (the PTX ISA's rule for atom/red
.add.f32, not measured here; .noftz f16/bf16 keep them).  Memory is global, the CTA's shared
window (.shared, .shared::cta) or, through a mapa'd address, any CTA's of the cluster
(.shared::cluster, as ld/st.shared::cluster reach it: ptxsim_async's `_cluster_shared`); a
generic address or a vector form raises Unsupported.
"""
from __future__ import annotations

from .ptxsim_alu import _WIDTH, Unsupported, _mask, _reg_bits, _signed
from .ptxsim_math import _BITS, _exact_op, _zero_sign, decode, round_bits

_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared",
           "shared::cluster": "shared::cluster"}
_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")
_FLOATS = ("f16", "bf16", "f32", "f64")


def _flush(bits, fmt):
    """A subnormal input as the zero of its sign (.ftz)."""
    mb = {"f32": 23}[fmt]
    if (bits >> mb) & 0xFF == 0:
        return bits & (1 << 31)
    return bits


def _float_add(a, b, fmt):
    ftz = fmt == "f32"
    if ftz:
        a, b = _flush(a, fmt), _flush(b, fmt)
    vals = [decode(a, fmt), decode(b, fmt)]
    r = _exact_op("add", vals)
    if r == 0 and not isinstance(r, float):
        return _zero_sign("add", vals, [a, b], fmt) << (_BITS[fmt] - 1)
    return round_bits(r, fmt, "rn", ftz=ftz)


def apply(op, ty, old, b, c=None):
    """The new bits of an element holding `old` after atom/red `op` of type `ty` with
    operands b (and c for cas), all raw bit patterns of the type's width."""
    bits = _WIDTH[ty]
    if op == "add":
        return _float_add(old, b, ty) if ty in _FLOATS else _mask(old + b, bits)
    if op in ("min", "max"):
        x, y = (_signed(old, bits), _signed(b, bits)) if ty[0] == "s" else (old, b)
        return old if (x <= y) == (op == "min") else b
    if op == "inc":
        return 0 if old >= b else old + 1
    if op == "dec":
        return b if old == 0 or old > b else old - 1
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return b
    if op == "cas":
        return c if old == b else old
    raise Unsupported(op)


class AtomicOps:
    """atom.<sem>.<scope>.<space>.<op>.<type> d, [a], b(, c) and red ... [a], b."""

    def _atomic(self, th, ctx, parts, mem_tok, srcs):
        if any(p.startswith("v") and p[1:].isdigit() for p in parts) or "L2::cache_hint" in parts:
            raise Unsupported(".".join(parts))
        space = next((_SPACES[p] for p in parts if p in _SPACES), None)
        op = next((p for p in parts[1:] if p in _OPS), None)
        ty = parts[-1]
        if space is None or op is None or ty not in _WIDTH:
            raise Unsupported(".".join(parts))
        n = _WIDTH[ty] // 8
        buf, off = self._mem(th, ctx, space, self._addr(th, ctx, mem_tok), n)
        old = int.from_bytes(buf[off:off + n], "little")
        vals = [_mask(self._read(th, ctx, s, ty), _WIDTH[ty]) for s in srcs]
        buf[off:off + n] = apply(op, ty, old, *vals).to_bytes(n, "little")
        return old

    def _op_atom(self, th, ctx, parts, ops):
        old = self._atomic(th, ctx, parts, ops[1], ops[2:])
        self._write(th, ops[0], old, _reg_bits(ops[0]))

    def _op_red(self, th, ctx, parts, ops):
        self._atomic(th, ctx, parts, ops[0], ops[1:])
