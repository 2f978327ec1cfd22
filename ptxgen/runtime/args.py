"""Launch arguments: check them against the kernel signature and pack them for cuLaunchKernel.

This module never touches the GPU, so every check and message is testable on a CPU machine
with stand-in objects (the one driver question, where a bare __cuda_array_interface__ array
lives, is a callback).  The per-launch work is kept small: one type lookup per tensor picks
an extractor, symbols are bound in a dict, and all scalars are range-checked by a single
``struct.pack_into`` (in C); only when that fails is the slow path run to name the culprit.
For torch tensors, ``Binder.specialize`` writes the same checks out per signature.
"""
from __future__ import annotations

import ctypes
import operator
import struct
from dataclasses import dataclass

from ..dtypes import dtype
from ..errors import LaunchError
from ..layout import row_major_strides
from .describe import (EXTRACT, ArgProblem, extractor, from_integer, from_torch, torch_dt,
                       torch_dtype_name, torch_dtypes)


class _RowMajor:
    """ParamSpec.strides = ROW_MAJOR: contiguous row-major (size-1 dims: any stride), which a
    tensor that says it is contiguous passes without its strides being compared."""

    def __repr__(self):
        return "ROW_MAJOR"


ROW_MAJOR = _RowMajor()


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter as a launch checks and packs it."""
    name: str                 # user-facing parameter name (for messages)
    kind: str                 # "tensor" | "scalar" | "symbol" (a shape dim, bound from tensors)
                              # | "tmap" (a tensor map the launcher builds, never bound)
    dtype: str                # ptxgen dtype name
    ptx_type: str             # ".u64" for tensors, ".s32"/".u32"/".f32"/... for scalars
    shape: tuple = ()         # tensors: ints or symbol names
    strides: object = None    # tensors: None (any), ROW_MAJOR, element strides, or
                              # callable(symbols) -> element strides
    align: int = 16           # required base-pointer alignment in bytes (tensors)


# struct codes per PTX parameter type (dtype.ptx.param): host packing, a fact of its own;
# 16-bit floats share .b16, so they are chosen by dtype below.
_FMT = {".u64": "Q", ".s64": "q", ".b64": "Q", ".u32": "I", ".s32": "i", ".b32": "I",
        ".u16": "H", ".s16": "h", ".b16": "H", ".u8": "B", ".s8": "b", ".b8": "B",
        ".f64": "d", ".f32": "f", ".f16": "e"}
_INT_RANGE = {c: (lo, hi) for c, lo, hi in [
    ("Q", 0, 2**64 - 1), ("q", -2**63, 2**63 - 1), ("I", 0, 2**32 - 1), ("i", -2**31, 2**31 - 1),
    ("H", 0, 2**16 - 1), ("h", -2**15, 2**15 - 1), ("B", 0, 255), ("b", -128, 127)]}
_FLOAT_MAX = {"f": 3.4028234663852886e38, "e": 65504.0, "d": float("inf")}


def _fmt(p: ParamSpec) -> str:
    if p.kind == "tensor":
        return "Q"
    if p.kind == "tmap":      # a CUtensorMap by value, filled per launch (runtime/tensormap.py)
        return "128s"
    if p.dtype == "float16":
        return "e"
    if p.ptx_type not in _FMT:
        raise LaunchError(f"parameter '{p.name}': unsupported PTX parameter type {p.ptx_type!r}")
    return _FMT[p.ptx_type]


def _bf16_bits(x) -> int:
    """Round-to-nearest-even float32 -> bfloat16 bits, for bfloat16 scalar parameters."""
    (u,) = struct.unpack("<I", struct.pack("<f", float(x)))
    if (u & 0x7F800000) == 0x7F800000:
        return (u >> 16) | (0x40 if u & 0xFFFF else 0)  # keep NaN a NaN
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


class ParamPacker:
    """Prebuilt parameter storage: one buffer with each value at its natural alignment and
    an array of pointers into it, whose address is cuLaunchKernel's ``kernelParams``."""

    def __init__(self, params: list[ParamSpec]):
        fmt, off, offsets = "<", 0, []
        for p in params:
            c = _fmt(p)
            size = struct.calcsize("<" + c)
            pad = -off % size
            fmt += "x" * pad + c
            off += pad
            offsets.append(off)
            off += size
        self.struct = struct.Struct(fmt)
        self.buffer = (ctypes.c_uint64 * max(1, (off + 7) // 8))()
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(1, len(params)))(*[base + o for o in offsets])
        self.kernel_params = ctypes.addressof(self.pointers) if params else 0
        self.offsets = offsets

    def pack(self, values) -> None:
        self.struct.pack_into(self.buffer, 0, *values)

    def bytes(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self.buffer), self.struct.size)


def _shape_text(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


class Binder:
    """Maps a call's arguments onto the kernel parameters: checks every tensor and scalar,
    binds shape symbols, and returns the values in parameter order, ready to pack.

    ``device`` pins the tensors to one device (a Launcher made for one Function); without it
    the arguments choose the device and must agree on it.  ``resolve(ptr) -> ordinal`` asks
    where an array that does not say (a bare __cuda_array_interface__) lives.
    """

    def __init__(self, params: list[ParamSpec], *, name: str, device: int | None = None,
                 resolve=None):
        self.name, self.params = name, list(params)
        self._dev = -1 if device is None else device   # -1: the arguments say
        self._resolve = resolve
        self.inputs = [p for p in self.params if p.kind != "symbol"]
        self.index = {p.name: i for i, p in enumerate(self.params)}
        self.plans = []      # per input: (param index, spec, accepted dtype names or None,
        for p in self.inputs:  # shape, shape has no symbols, alignment, strides are checked)
            if p.kind not in ("tensor", "scalar"):
                raise LaunchError(f"parameter '{p.name}': unknown kind {p.kind!r}")
            ok = None
            if p.kind == "tensor":
                dn = dtype(p.dtype).name
                ok = {dn} | ({"uint16"} if dn == "bfloat16" else set()) | (
                    {"uint8"} if dtype(dn).kind == "storage" else set())
            static = all(d.__class__ is int for d in p.shape)
            self.plans.append((self.index[p.name], p, ok, tuple(p.shape), static, p.align,
                               p.strides is not None))
        self.symbols = [(i, p.name) for i, p in enumerate(self.params) if p.kind == "symbol"]
        self.fmts = [_fmt(p) for p in self.params]
        self.bf16 = [i for i, p in enumerate(self.params)
                     if p.kind != "tensor" and dtype(p.dtype).name == "bfloat16"]
        self.signature = ", ".join(p.name for p in self.inputs)
        self.specialized_for = None   # (tensor type, dtype objects) of the last specialize

    # ---- argument list ------------------------------------------------------------------
    def _merge(self, args, kwargs):
        """Positional + keyword arguments -> one value per input, plus keyword symbols."""
        n = len(self.inputs)
        if len(args) > n:
            raise LaunchError(f"kernel '{self.name}' takes {n} arguments ({self.signature}), "
                              f"got {len(args)}")
        vals = list(args) + [_MISSING] * (n - len(args))
        syms = {}
        for k, v in kwargs.items():
            i = self.index.get(k)
            if i is None:
                raise LaunchError(f"kernel '{self.name}': unexpected keyword argument '{k}'")
            p = self.params[i]
            if p.kind == "symbol":
                syms[k] = self._int(p, v)
                continue
            j = self.inputs.index(p)
            if vals[j] is not _MISSING:
                raise LaunchError(f"kernel '{self.name}': got multiple values for argument '{k}'")
            vals[j] = v
        missing = [p.name for p, v in zip(self.inputs, vals) if v is _MISSING]
        if missing:
            given = n - len(missing)
            raise LaunchError(f"kernel '{self.name}' takes {n} arguments ({self.signature}), got "
                              f"{given}: missing " + ", ".join(f"'{m}'" for m in missing))
        return vals, syms

    def bind(self, args, kwargs=None):
        """(values in parameter order, the input objects in input order)."""
        values, inputs, _ = self.bind_device(args, kwargs)
        return values, inputs

    def bind_device(self, args, kwargs=None):
        """(values, input objects, device): the device every tensor argument is on, or -1
        when none says (raw pointers only: the caller launches on the current device)."""
        if kwargs or len(args) != len(self.inputs):
            args, symbols = self._merge(args, kwargs or {})
        else:
            symbols = {}
        values = [None] * len(self.params)
        bound_by = dict.fromkeys(symbols) if symbols else {}  # symbol -> binding tensor name
        strided = None
        mydev, first = self._dev, None     # the device so far, and the argument that set it
        for (i, p, ok, want, static, align, check_strides), a in zip(self.plans, args):
            if ok is None:
                values[i] = a
                continue
            cls = a.__class__
            if cls is not int:
                f = EXTRACT.get(cls) or extractor(a)
                if f is from_integer:
                    a, cls = operator.index(a), int
            if cls is int:
                if a % align or a <= 0:
                    self._bad_pointer(p, a)
                values[i] = a
                continue
            if f is from_torch and a.is_cuda:          # inline: the common case
                dn = torch_dt.get(a.dtype) or torch_dtype_name(a.dtype)
                ptr, shape, dev = a.data_ptr(), a.shape, a.get_device()
                strides = None if not check_strides or a.is_contiguous() else a.stride()
            elif f is None:
                raise LaunchError(
                    f"argument '{p.name}': expected a CUDA tensor (__cuda_array_interface__ or "
                    f"__dlpack__) or a device pointer (int), got {type(a).__name__}")
            else:
                try:
                    ptr, shape, strides, dn, dev = f(a, check_strides)
                except ArgProblem as e:
                    raise LaunchError(f"argument '{p.name}': {e}") from None
                if dev.__class__ is not int:
                    self._place_and_dtype(p, dev, dn)
                if dev < 0 and self._resolve is not None:
                    dev = self._resolve(ptr) if ptr else -1
            if dn not in ok:
                self._place_and_dtype(p, dev, dn)
            if dev != mydev and dev >= 0:
                if mydev < 0:
                    mydev, first = dev, p
                else:
                    self._other_device(p, dev, first, mydev)
            if static:
                if shape != want:
                    self._shape(p, shape, symbols, bound_by)   # raises
            elif len(shape) != len(want):
                self._shape(p, shape, symbols, bound_by)       # raises
            else:
                for w, got in zip(want, shape):
                    if w.__class__ is int:
                        if w != got:
                            self._shape(p, shape, symbols, bound_by)
                    else:
                        v = symbols.get(w)
                        if v is None:
                            symbols[w] = got
                            bound_by[w] = p.name
                        elif v != got:
                            self._shape(p, shape, symbols, bound_by)
            if ptr % align or not ptr:
                self._bad_pointer(p, ptr, shape)
            if check_strides and (strides is not None or p.strides is not ROW_MAJOR):
                strided = strided or []
                strided.append((p, shape, strides))
            values[i] = ptr
        for i, s in self.symbols:
            v = symbols.get(s)
            if v is None:
                raise LaunchError(f"kernel '{self.name}': symbol {s} is not bound: no tensor "
                                  f"argument has it in its shape; pass {s}=<int> by keyword")
            if v < 1:
                self._empty(s, v, bound_by)
            values[i] = v
        if strided:
            for p, shape, strides in strided:
                self._strides(p, shape, strides, symbols)
        for i in self.bf16:
            values[i] = _bf16_bits(self._number(self.params[i], values[i]))
        return values, args, mydev

    # ---- the specialized fast path -------------------------------------------------------
    def specialize(self, tensor_type, dtype_objects: dict):
        """A bind function for calls whose tensors are all exactly ``tensor_type`` (torch's
        Tensor), generated for this signature: the same checks as ``bind_device``, written out
        per parameter with no loop, no per-argument type dispatch and no symbol dict, which
        halves the Python time of a launch.  Anything it does not accept as is (keywords, other
        array types, raw pointers, and every error) goes to ``bind_device``, so results and
        messages are the generic path's.  ``dtype_objects`` maps a ptxgen dtype name to the
        tensor_type dtype objects that carry it.  None where the signature does not suit (see
        ``check_source``)."""
        fall = "return generic(args, kwargs)"
        code = self.check_source(tensor_type, dtype_objects, fall)
        if code is None:
            return None
        env, lines, values = code
        env["generic"] = self.bind_device
        self.specialized_for = (tensor_type, dtype_objects)
        src = "\n".join(["def bind_fast(args, kwargs):", "    if kwargs:", "        " + fall,
                         *lines, f"    return [{values}], args, dev"]) + "\n"
        exec(compile(src, f"<ptxgen bind {self.name}>", "exec"), env)
        fast = env["bind_fast"]
        fast.source = src
        return fast

    def check_source(self, tensor_type, dtype_objects: dict, fall: str):
        """``specialize``'s checks as source: (globals they need, the lines of a function body
        that unpack ``args`` into a0, a1, ... and check them, running ``fall`` on anything
        they do not accept, the expressions of the values in parameter order).  After them,
        ``dev`` is the tensors' device.  None where the signature does not suit: no tensors,
        bfloat16 scalars, strides other than row-major or any, or a symbol that no tensor
        binds."""
        tensors = [(j, i, p) for j, (i, p, ok, *_rest) in enumerate(self.plans) if ok is not None]
        bound = {d for _, _, p in tensors for d in p.shape if d.__class__ is not int}
        if not tensors or self.bf16 or any(s not in bound for _, s in self.symbols) or \
                any(p.strides is not None and p.strides is not ROW_MAJOR for _, _, p in tensors):
            return None
        env = {"T": tensor_type}
        fall = "        " + fall
        names = [f"a{j}" for j in range(len(self.inputs))]
        types, unpack, dims, place, ptrs = [], [], [], [], []
        sym_var: dict = {}
        for n, (j, i, p) in enumerate(tensors):
            a = f"a{j}"
            dts = {o for name in self.plans[j][2] for o in dtype_objects.get(name, ())}
            env[f"D{j}"] = next(iter(dts)) if len(dts) == 1 else frozenset(dts)
            types.append(f"{a}.__class__ is not T or {a}.dtype "
                         f"{'is not' if len(dts) == 1 else 'not in'} D{j}")
            got = []
            for d, w in enumerate(p.shape):
                v = f"s{j}_{d}"
                if w.__class__ is int:
                    dims.append(f"{v} != {w}")
                elif w in sym_var:
                    dims.append(f"{v} != {sym_var[w]}")
                else:
                    sym_var[w] = v
                    dims.append(f"{v} < 1")
                got.append(v)
            unpack.append(f"({', '.join(got)},) = {a}.shape")
            if n == 0:
                unpack.append(f"dev = {a}.get_device()")
                place.append("dev < 0" if self._dev < 0 else f"dev != {self._dev}")
            else:
                place.append(f"{a}.get_device() != dev")
            ptrs.append(f"p{j} % {p.align} or not p{j}")
            if p.strides is ROW_MAJOR:
                ptrs.append(f"not {a}.is_contiguous()")

        def test(conds):
            return ["    if (" + "\n            or ".join(conds) + "):", fall]

        lines = ["    try:", f"        {', '.join(names)}, = args", "    except ValueError:",
                 fall, *test(types), "    try:",
                 *(f"        {u}" for u in unpack), "    except ValueError:   # another rank",
                 fall, *test(dims + place),
                 *(f"    p{j} = a{j}.data_ptr()" for j, _, _ in tensors), *test(ptrs)]
        by_index = {i: f"p{j}" for j, i, _ in tensors}
        by_index.update({i: f"a{j}" for j, (i, p, ok, *_rest) in enumerate(self.plans)
                         if ok is None})
        by_index.update({i: sym_var[s] for i, s in self.symbols})
        return env, lines, ", ".join(by_index[i] for i in range(len(self.params)))

    def specialize_for_torch(self):
        """``specialize`` for torch.Tensor when torch is imported, else None."""
        import sys
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "Tensor"):
            return None
        return self.specialize(torch.Tensor, torch_dtypes())

    # ---- individual checks (slow paths build the exact messages) -------------------------
    def _place_and_dtype(self, p, dev, dn) -> None:
        if dev.__class__ is not int:
            where = "the CPU" if dev == "cpu" else dev
            raise LaunchError(f"argument '{p.name}': is on {where}; pass a CUDA tensor")
        raise LaunchError(f"argument '{p.name}': expected dtype {dtype(p.dtype).name}, got {dn}")

    def _other_device(self, p, dev, first, mydev) -> None:
        if first is None:    # the device was fixed when this Binder was made
            raise LaunchError(f"argument '{p.name}': is on cuda:{dev}, but the kernel runs on "
                              f"cuda:{mydev}")
        raise LaunchError(f"kernel '{self.name}': argument '{p.name}' is on cuda:{dev} but "
                          f"argument '{first.name}' is on cuda:{mydev}; a launch runs on one "
                          f"device, so move them to the same one")

    def _empty(self, s, v, bound_by) -> None:
        src = bound_by.get(s)
        if src is None:
            raise LaunchError(f"kernel '{self.name}': symbol {s} = {v} (passed as {s}={v}) must "
                              f"be at least 1")
        p = self.params[self.index[src]]
        raise LaunchError(f"argument '{src}': dim {list(p.shape).index(s)} is symbol {s} = {v}; "
                          f"shape symbols must be at least 1 (an empty tensor cannot be launched "
                          f"on)")

    def _shape(self, p, shape, symbols, bound_by) -> None:
        want = p.shape
        if len(shape) != len(want):
            raise LaunchError(f"argument '{p.name}': expected rank {len(want)}, got rank "
                              f"{len(shape)}")
        for d, (w, got) in enumerate(zip(want, shape)):
            if w.__class__ is int:
                if w != got:
                    exp = tuple(symbols.get(x, x) if isinstance(x, str) else x for x in want)
                    raise LaunchError(f"argument '{p.name}': expected shape {_shape_text(exp)}, "
                                      f"got {_shape_text(shape)}")
                continue
            v = symbols.get(w)
            if v is None:
                symbols[w] = got
                bound_by[w] = p.name
            elif v != got:
                src = bound_by.get(w)
                how = f"bound by '{src}'" if src else f"passed as {w}={v}"
                raise LaunchError(f"argument '{p.name}': dim {d} is symbol {w} = {v} ({how}), "
                                  f"got {got}")

    def _strides(self, p, shape, strides, symbols) -> None:
        exp = p.strides
        exp = row_major_strides(shape) if exp is ROW_MAJOR else exp(symbols) if callable(exp) else exp
        exp = tuple(exp)
        if isinstance(strides, tuple) and len(strides) == 3 and strides[0] == "bytes":
            raise LaunchError(f"argument '{p.name}': byte strides {strides[1]} are not multiples "
                              f"of the element size {strides[2]}")
        got = row_major_strides(shape) if strides is None else tuple(strides)
        if any(e != g for e, g, n in zip(exp, got, shape) if n != 1) or len(exp) != len(got):
            note = " (contiguous row-major)" if exp == row_major_strides(shape) else ""
            raise LaunchError(f"argument '{p.name}': expected strides {exp} elements{note}, "
                              f"got {got}")

    def _bad_pointer(self, p, ptr, shape=None):
        if ptr == 0 and shape is not None and 0 in tuple(shape):
            raise LaunchError(f"argument '{p.name}': is empty (shape {_shape_text(shape)}); a "
                              f"launch needs every dim to be at least 1")
        if ptr == 0:
            raise LaunchError(f"argument '{p.name}': pointer is null (0); pass an allocated CUDA "
                              f"tensor or device address")
        if ptr < 0:
            raise LaunchError(f"argument '{p.name}': pointer {ptr} is negative; pass a device "
                              f"address")
        raise LaunchError(f"argument '{p.name}': base pointer {ptr:#x} is not {p.align}-byte "
                          f"aligned (declared align={p.align})")

    def _int(self, p, v) -> int:
        code = self.fmts[self.index[p.name]]
        if not hasattr(v, "__index__"):
            raise LaunchError(f"argument '{p.name}': expected an integer ({dtype(p.dtype).name}), "
                              f"got {type(v).__name__} {v!r}")
        v = operator.index(v)
        lo, hi = _INT_RANGE.get(code, (-2**63, 2**64 - 1))
        if not lo <= v <= hi:
            raise LaunchError(f"argument '{p.name}': expected {dtype(p.dtype).name} in "
                              f"[{lo}, {hi}], got {v}")
        return v

    def _number(self, p, v) -> float:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
            raise LaunchError(f"argument '{p.name}': expected a number ({dtype(p.dtype).name}), "
                              f"got {type(v).__name__} {v!r}")
        return float(v)

    def bf16_scalar(self, i: int, v) -> int:
        """The bits of parameter i's bfloat16 value v (a number, else the error naming it)."""
        return _bf16_bits(self._number(self.params[i], v))

    def scalar_error(self, values) -> None:
        """Called when packing failed: find the value that did not fit and say so."""
        for i, p in enumerate(self.params):
            if p.kind == "tensor":
                if not 0 < values[i] < 2**64:
                    raise LaunchError(f"argument '{p.name}': pointer {values[i]:#x} does not fit "
                                      f"in 64 bits")
                continue
            code, v = self.fmts[i], values[i]
            if code in _INT_RANGE:
                self._int(p, v)
            elif abs(self._number(p, v)) > _FLOAT_MAX[code] and abs(float(v)) != float("inf"):
                raise LaunchError(f"argument '{p.name}': {float(v)!r} is out of range for "
                                  f"{dtype(p.dtype).name} (max {_FLOAT_MAX[code]:g})")
        raise LaunchError(f"kernel '{self.name}': could not pack the arguments {values!r}")


_MISSING = object()
