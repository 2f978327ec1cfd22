"""Targets: arch names, the PTX .version each needs, and instruction gating as data.

The version table and every gate below were measured with ptxas 13.0 / nvJitLink 13.5
(see shared/ptx-reference.md).  A gate matches an opcode by its dotted prefix, so the
same table checks structured forms and raw `pg.ptx[...]` escapes alike.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..errors import ArchError

# target -> minimum .version (ptx-reference §1)
MIN_PTX = {
    "sm_70": (6, 0), "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4),
    "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0),
    "sm_100": (8, 6), "sm_100a": (8, 6), "sm_100f": (8, 8), "sm_101a": (8, 6),
    "sm_103a": (8, 8), "sm_103f": (8, 8), "sm_110a": (9, 0),
    "sm_120": (8, 7), "sm_120a": (8, 7), "sm_121": (8, 8), "sm_121a": (8, 8),
}
MAX_PTX = (9, 0)   # ptxas 13.0 and a CUDA 13.0 driver take at most .version 9.0

TCGEN05_ARCHS = frozenset({"sm_100a", "sm_100f", "sm_101a", "sm_103a", "sm_103f"})
# cvt to / from e2m1x2 (float4_e2m1fn pairs), measured with ptxas 13.0 through nvJitLink 13.5:
# assembles for these targets at their own minimum .version (PTX 8.6 for sm_100a) and fails
# on sm_90a, sm_100, sm_120 and sm_121 ("Feature 'cvt.e2m1x2.f32' not supported on .target");
# sm_101a is the PTX ISA's word (nvJitLink 13.5 does not know the target)
FP4_CVT_ARCHS = frozenset({"sm_100a", "sm_100f", "sm_101a", "sm_103a", "sm_103f", "sm_110a",
                           "sm_120a", "sm_121a"})


class Target(NamedTuple):
    """A parsed target: arch name, SM number and suffix (the facts below read it).  Target
    and Gate are NamedTuples (immutable, compared by value): a frozen dataclass compiles six
    generated methods on every import."""
    arch: str          # "sm_90a"
    sm: int            # 90
    suffix: str        # "", "a" or "f"

    @property
    def min_ptx(self) -> tuple:
        return MIN_PTX[self.arch]

    def __str__(self):
        return self.arch


@lru_cache(maxsize=None)
def parse_target(arch: str) -> Target:
    # every name of MIN_PTX is sm_<digits> plus "", "a" or "f": the lookup is the parse (a
    # regex compiled on the first build would cost more than the rest of a small build)
    if arch not in MIN_PTX:
        raise ArchError(f"unknown target {arch!r}; known targets: {', '.join(MIN_PTX)}")
    suffix = arch[-1] if arch[-1] in "af" else ""
    return Target(arch, int(arch[3:len(arch) - len(suffix)]), suffix)


class Gate(NamedTuple):
    """`prefix` needs sm >= min_sm (or one of `archs`) and PTX >= min_ptx."""
    prefix: str
    min_sm: int = 0
    min_ptx: tuple = (0, 0)
    archs: frozenset | None = None
    feature: str = ""
    except_archs: frozenset = frozenset()
    whole_program: bool = False   # ptxas drops it when compiling relocatable code (nvJitLink)


def _g(prefix, min_sm=0, min_ptx=(0, 0), archs=None, feature="", except_archs=(),
       whole_program=False):
    return Gate(prefix, min_sm, min_ptx, frozenset(archs) if archs else None, feature,
                frozenset(except_archs), whole_program)


# atom / red / fence (builder/atomic.py), measured with ptxas 13.0 through nvJitLink 13.5 on
# sm_80, sm_90a and sm_100a (every combination below assembles; the arch gates are in GATES).
# ATOMIC_TYPES: the PTX types each operation takes (red takes atom's but exch and cas).  Not
# here, as ptxas refuses them: add .s64 / .b32 / .b64 ("Operation .add requires .u32 or .s32
# or .u64 or .f64 or .f16 or .f16x2 or .f32 or .bf16 or .bf16x2"; an int64 add is .u64, the
# same bits), min/max of f32/f64 ("Operation .min requires .u32 or .s32 or .u64 or .s64 or
# .f16 ..."), scalar min/max of f16/bf16 ("Vector modifier required for instruction
# 'atom.min.f16.global'": packed forms only, sm_90, PTX 8.1), inc/dec other than .u32
# ("Operation .inc requires .u32 type"), and/or/xor/exch of signed, unsigned or float types
# ("requires .b32 or .b64 type"), any 8-bit or u16/s16 type ("Unexpected instruction types"),
# and a b16 operation but cas ("Arguments mismatch").  A .b type takes any register of its
# width (cas.b32 of f32 registers assembles); a b16 one needs a 16-bit register.
ATOMIC_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
    "min": ("u32", "s32", "u64", "s64"), "max": ("u32", "s32", "u64", "s64"),
    "inc": ("u32",), "dec": ("u32",),
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    "exch": ("b32", "b64"), "cas": ("b16", "b32", "b64"),
}
RED_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
# ptxas: "Illegal modifier '.acquire' for instruction 'red'" (and '.acq_rel'); "Illegal modifier
# '.sc' for instruction 'atom'".  fence.acquire / fence.release need sm_90 and PTX 8.6: not used
ATOM_SEMS = ("relaxed", "acquire", "release", "acq_rel")
RED_SEMS = ("relaxed", "release")
FENCE_SEMS = ("acq_rel", "sc")
ATOMIC_SCOPES = ("cta", "cluster", "gpu", "sys")
ATOMIC_SPACES = ("global", "shared")   # .shared is .shared::cta, and needs no PTX 7.8
# Another CTA's shared memory (a pg.cluster_view: the mapa'd 32-bit address), measured with
# ptxas 13.0 through nvJitLink 13.5: every (op, PTX type, sem, scope) above, scope .cta
# included, assembles as atom/red.<sem>.<scope>.shared::cluster.<op>.<type> on sm_90 (PTX
# 7.8), sm_90a (8.0), sm_100, sm_100a (8.6) and sm_120 (8.7), 632 forms each, and the types
# left out above fail with the same messages as in global memory.  sm_80 refuses every one:
# "Feature '::cluster' requires .target sm_90 or higher" (and at .version 7.0 "Feature
# '::cluster' requires PTX ISA .version 7.8 or later"); sm_89 too, adding "Feature '.cluster
# scope' requires .target sm_90 or higher" for scope=cluster.  ptxas also takes scope .cta
# here, but the helpers refuse it: by the PTX ISA's memory model (8.7, morally strong
# operations; the atomicity of RMW operations) two atomics are atomic with respect to each
# other only if each one's scope includes the other's thread, and a .cta scope leaves out the
# owning CTA and every other CTA of the cluster.
ATOMIC_CLUSTER_SPACE = "shared::cluster"
# a buffer's scope -> the PTX state space its loads, stores and atomics name (a cluster_view is
# another CTA's tile: .shared::cluster at its mapa'd address)
STATE_SPACE = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local": "local",
               "shared.cluster": ATOMIC_CLUSTER_SPACE}


def _atomic_gates() -> list:
    """atom.<sem>.<scope>.<space>.<op>.<type> and fence.<sem>.<scope>: .cluster scope needs
    sm_90 and PTX 7.8 (ptxas: "Feature '.cluster scope' requires .target sm_90 or higher"), a
    bfloat16 add too ("Instruction 'atom.add.bf16.global' requires .target sm_90 or higher"),
    measured with ptxas 13.0 through nvJitLink 13.5 on sm_80, sm_90a and sm_100a.  A float16
    add and a 16-bit cas need sm_70 and PTX 6.3 (PTX ISA; nvJitLink 13.5 has no sm_70 to
    measure, and sm_75 takes both at its own 6.3).  A longer prefix wins, so each typed gate
    of cluster scope carries the cluster requirement too."""
    cluster = (90, (7, 8))
    out = [_g(f"{i}.{sem}.cluster", *cluster, feature=f"{i} scope=cluster")
           for i, sems in (("atom", ATOM_SEMS), ("red", RED_SEMS), ("fence", FENCE_SEMS))
           for sem in sems]
    for i, sems, ops in (("atom", ATOM_SEMS, ("add.noftz.f16", "add.noftz.bf16", "cas.b16")),
                         ("red", RED_SEMS, ("add.noftz.f16", "add.noftz.bf16"))):
        for sem in sems:
            for scope in ATOMIC_SCOPES:
                for space in ATOMIC_SPACES:
                    for op in ops:
                        sm, ptx, feature = (90, (7, 8), f"bfloat16 {i}.add") if "bf16" in op \
                            else (70, (6, 3), "")
                        if scope == "cluster":
                            sm, ptx = max(sm, cluster[0]), max(ptx, cluster[1])
                            feature = feature or f"{i} scope=cluster"
                        out.append(_g(f"{i}.{sem}.{scope}.{space}.{op}", sm, ptx,
                                      feature=feature))
    # distributed shared memory: sm_90 and PTX 7.8 for every operation and type (that covers
    # the bfloat16 add's and cluster scope's needs, so one gate per (sem, scope) is the
    # longest prefix of each form)
    for i, sems in (("atom", ATOM_SEMS), ("red", RED_SEMS)):
        for sem in sems:
            for scope in ATOMIC_SCOPES:
                out.append(_g(f"{i}.{sem}.{scope}.{ATOMIC_CLUSTER_SPACE}", *cluster,
                              feature=f"distributed shared memory ({i}.shared::cluster)"))
    return out


# Longest matching prefix wins.  Opcodes are compared on whole dotted components.
GATES = [
    _g("ldmatrix", 75, (6, 5)),
    _g("stmatrix", 90, (7, 8), feature="stmatrix"),
    _g("cp.async", 80, (7, 0)),
    _g("mma.sync", 80, (7, 0)),
    _g("mma.sync.aligned.m16n8k32.row.col.f32.e4m3", 89, (8, 4)),
    _g("mma.sync.aligned.m16n8k32.row.col.f32.e5m2", 89, (8, 4)),
    _g("cp.async.bulk", 90, (8, 0)),
    _g("cp.reduce.async.bulk", 90, (8, 0)),
    _g("mbarrier.init", 80, (7, 0)),
    _g("mbarrier.arrive", 80, (7, 0)),
    _g("mbarrier.arrive.expect_tx", 90, (8, 0)),
    # an arrive on another CTA's barrier, measured with nvJitLink 13.5 and ptxas 13.0: both
    # forms assemble on sm_90 at .version 8.0, sm_90a and sm_100a.  Release at cluster scope:
    # at 7.8 "Modifier '.release' on 'mbarrier.arrive' requires PTX ISA .version 8.0", on
    # sm_80 "Feature '.cluster scope' requires .target sm_90 or higher"; PTX's default (CTA
    # scope): at 7.8 "Feature '.shared::cluster' requires PTX ISA .version 8.0 or later", on
    # sm_80 "Feature '.shared::cluster' requires .target sm_90 or higher"
    _g("mbarrier.arrive.release.cluster", 90, (8, 0),
       feature="mbarrier.arrive on another CTA's barrier (mbarrier.arrive.release.cluster)"),
    _g("mbarrier.arrive.shared::cluster", 90, (8, 0),
       feature="mbarrier.arrive on another CTA's barrier (mbarrier.arrive.shared::cluster)"),
    _g("mbarrier.expect_tx", 90, (8, 0)),
    _g("mbarrier.test_wait", 80, (7, 1)),
    _g("mbarrier.try_wait", 90, (7, 8)),
    # ptxas 13.0 at 7.8: "Modifier '.acquire' on 'mbarrier.try_wait.parity' requires PTX ISA
    # .version 8.0 or later" (and "Feature 'scopes on mbarrier operations' ..."); 8.0 assembles
    _g("mbarrier.try_wait.parity.acquire.cluster", 90, (8, 0),
       feature="mbarrier.try_wait with a cluster-scope acquire (scope='cluster')"),
    _g("mbarrier.inval", 80, (7, 0)),
    _g("fence.proxy.async", 90, (8, 0)),
    _g("fence.mbarrier_init", 90, (8, 0)),
    _g("prefetch.tensormap", 90, (8, 0)),
    _g("cvt.f32.bf16", 90, (7, 8)),
    _g("cvt.rn.bf16.f32", 80, (7, 0)),
    # nvJitLink's relocatable compile ignores setmaxnreg (ptxas C7504): whole program only
    _g("setmaxnreg", 90, (8, 0), archs={"sm_90a", "sm_100a", "sm_101a", "sm_103a", "sm_120a"},
       whole_program=True),
    _g("wgmma", 90, (8, 0), archs={"sm_90a"}),
    _g("tcgen05", 100, (8, 6), archs=TCGEN05_ARCHS),
    _g("tcgen05.shift", 100, (8, 6), archs={"sm_100a", "sm_101a", "sm_103a"}),
    _g("elect.sync", 90, (8, 0)),
    # asynchronous copies and clusters (primitives/async_copy, builder/cluster.py)
    _g("createpolicy", 80, (7, 4)),
    _g("cvta.param", 70, (7, 7)),
    _g("barrier.cluster", 90, (7, 8)),
    _g("mapa", 90, (7, 8)),
    _g("griddepcontrol", 90, (7, 8), feature="programmatic dependent launch (griddepcontrol)"),
    _g("ld.shared::cluster", 90, (7, 8), feature="distributed shared memory (ld.shared::cluster)"),
    _g("st.shared::cluster", 90, (7, 8), feature="distributed shared memory (st.shared::cluster)"),
    _g("reqnctapercluster", 90, (7, 8), feature="thread block clusters (.reqnctapercluster)"),
    _g("sreg.cluster", 90, (7, 8), feature="cluster special registers (%cluster_ctarank, "
                                           "%clusterid)"),
    # tile math (measured with ptxas 13.0 through nvJitLink; PTX 8.1 brings .satfinite for
    # 16-bit floats, and e4m3/e5m2 conversions to sm_89 (sm_90 had them from 7.8)
    *[_g(f"{op}.rn.{t}", 90, (7, 8)) for op in ("add", "sub", "mul") for t in ("bf16", "bf16x2")],
    _g("fma.rn.bf16", 80, (7, 0)), _g("fma.rn.bf16x2", 80, (7, 0)),
    *[_g(f"{op}.{t}", 80, (7, 0)) for op in ("min", "max")
      for t in ("f16", "f16x2", "bf16", "bf16x2")],
    _g("ex2.approx.f16", 75, (7, 0)), _g("ex2.approx.f16x2", 75, (7, 0)),
    _g("ex2.approx.ftz.bf16", 90, (7, 8)), _g("ex2.approx.ftz.bf16x2", 90, (7, 8)),
    _g("cvt.rn.f16x2.f32", 80, (7, 0)), _g("cvt.rn.bf16x2.f32", 80, (7, 0)),
    *[_g(f"cvt.{r}.bf16.f32", 80, (7, 0)) for r in ("rz", "rm", "rp")],
    *[_g(f"cvt.{r}.satfinite", 80, (8, 1)) for r in ("rn", "rz", "rm", "rp")],
    *[_g(f"cvt.rn.satfinite.{t}x2", 89, (8, 1)) for t in ("e4m3", "e5m2")],
    *[_g(f"cvt.rn.f16x2.{t}x2", 89, (8, 1)) for t in ("e4m3", "e5m2")],
    # the e2m1x2 operand is a .b8 register; .satfinite is required (ptxas: "'.satfinite'
    # modifier required for instruction 'cvt' with destination type '.e2m1x2'")
    _g("cvt.rn.satfinite.e2m1x2", 100, (8, 6), archs=FP4_CVT_ARCHS),
    _g("cvt.rn.f16x2.e2m1x2", 100, (8, 6), archs=FP4_CVT_ARCHS),
    _g("redux.sync", 80, (7, 0)),
    *_atomic_gates(),
]
_GATE_BY_PREFIX = {g.prefix: g for g in GATES}

# Modifiers that raise the PTX version wherever they appear (measured with ptxas 13.0):
# eviction priorities / prefetch sizes need 7.4, `.shared::cta` spellings need 7.8.
MODIFIER_PTX = (("L1::", (7, 4)), ("L2::", (7, 4)), ("shared::cta", (7, 8)),
                ("shared::cluster", (7, 8)))


@lru_cache(maxsize=4096)
def gate_for(opcode: str) -> Gate | None:
    """The gate of an opcode's longest gated prefix (cached: the emitter asks it for every
    instruction whose form it checks, and the table never changes)."""
    parts = opcode.split(".")
    for n in range(len(parts), 0, -1):
        g = _GATE_BY_PREFIX.get(".".join(parts[:n]))
        if g is not None:
            return g
    return None


def check_opcode(opcode: str, target: Target, *, feature: str | None = None,
                 min_sm: int = 0, min_ptx=(0, 0)) -> tuple:
    """Raise ArchError if `target` lacks `opcode`; return the PTX version it needs."""
    g = gate_for(opcode)
    need_ptx = min_ptx
    if "::" in opcode:
        for mod, ver in MODIFIER_PTX:
            if mod in opcode and ver > need_ptx:
                need_ptx = ver
    name = feature or (g.feature if g and g.feature else opcode.split(" ")[0])
    if g is not None:
        need_ptx = max(need_ptx, g.min_ptx)
        if g.archs is not None and target.arch not in g.archs:
            raise ArchError(f"instruction '{opcode}' needs one of {', '.join(sorted(g.archs))}; "
                            f"the target is {target.arch}")
        min_sm = max(min_sm, g.min_sm)
    if target.sm < min_sm:
        raise ArchError(f"'{name}' needs sm_{min_sm} or newer; the target is {target.arch}")
    if need_ptx > MAX_PTX:
        raise ArchError(f"'{name}' needs PTX ISA {need_ptx[0]}.{need_ptx[1]}, newer than "
                        f"{MAX_PTX[0]}.{MAX_PTX[1]} that ptxas 13.0 and the CUDA 13.0 driver take")
    return need_ptx


def arch_specific(target: Target) -> Target:
    """The arch-specific ('a') target of the same SM where the table has one (sm_100 ->
    sm_100a), else `target`: what a build for the same GPU could use, for naming the fix."""
    arch = f"sm_{target.sm}a"
    return parse_target(arch) if arch in MIN_PTX else target


def has_opcode(opcode: str, target: Target) -> bool:
    """Whether `target` has `opcode` by its gate: for choosing between two lowerings."""
    return _has_opcode(opcode, target.arch)


@lru_cache(maxsize=None)
def _has_opcode(opcode: str, arch: str) -> bool:
    try:
        check_opcode(opcode, parse_target(arch))
    except ArchError:
        return False
    return True


# The widest load/store of every target: 128 bits (.v4.b32, .v2.b64), whose address must be
# a multiple of its 16 bytes (PTX ISA, "vectors").  Kernels that read rows in such vectors
# test a tensor's address against it.
VECTOR_BITS = 128

# 256-bit (32-byte) loads/stores, .v8.b32 / .v4.b64: sm_100 or newer with PTX 8.8, and never
# in shared memory (ptxas: "global state space expected for feature '256 bit wide load/store'",
# ptx-reference §2).  WIDE_VECTOR_GATE is check_opcode's keywords for them.
WIDE_VECTOR_BITS = 256
WIDE_VECTOR_GATE = {"feature": "256 bit wide load/store", "min_sm": 100, "min_ptx": (8, 8)}


def wide_vector_refusal(target: Target | None = None, space: str | None = None) -> str:
    """Why a 256-bit load/store cannot be used on `target` or in state space `space` ('' if it
    can); leave one out to ask about the other alone."""
    g = WIDE_VECTOR_GATE
    if target is not None and target.sm < g["min_sm"]:
        return (f"256-bit loads/stores need sm_{g['min_sm']} or newer and PTX "
                f"{g['min_ptx'][0]}.{g['min_ptx'][1]}; the target is {target.arch}")
    if space is not None and space != "global":
        return "256-bit loads/stores exist only in the global state space"
    return ""


# The bulk copy engine (TMA: cp.async.bulk, and its .tensor form through a tensor map) moves
# memory in 16-byte units: a bulk copy's size and addresses, and a tensor map's global
# address, byte strides and box row are multiples of TMA_ALIGN bytes.  So a kernel that reads
# a tensor through TMA needs rows of whole units at an aligned address, or a padded copy.  A
# box has at most TMA_MAX_BOX elements per dimension (CUDA driver API,
# cuTensorMapEncodeTiled); a plain bulk copy moves at most BULK_MAX_BYTES (ptx-reference §6).
TMA_ALIGN = 16
TMA_MAX_BOX = 256
BULK_MAX_BYTES = 1048560


# Shared memory per CTA, bytes: (static limit enforced by ptxas, dynamic opt-in maximum).
# Static figures measured with ptxas 13.0 (ptx-reference §3); dynamic maxima are the
# documented per-block opt-in limits (A100 163 KiB, sm_86/89 99 KiB, H100/B200 227 KiB).
SMEM_LIMITS = {
    80: (48 * 1024, 163 * 1024), 86: (48 * 1024, 99 * 1024), 87: (48 * 1024, 163 * 1024),
    89: (48 * 1024, 99 * 1024), 90: (227 * 1024, 227 * 1024), 100: (227 * 1024, 227 * 1024),
    101: (227 * 1024, 227 * 1024), 103: (227 * 1024, 227 * 1024), 110: (227 * 1024, 227 * 1024),
    120: (48 * 1024, 99 * 1024), 121: (48 * 1024, 99 * 1024),
}
# Dynamic shared memory a launch may use without opting in (cuFuncSetAttribute
# MAX_DYNAMIC_SHARED_SIZE_BYTES), on every arch (CUDA C++ Programming Guide, shared memory).
DYNAMIC_SMEM_DEFAULT = 48 * 1024


# Registers: 64 Ki 32-bit registers per SM, at most 255 per thread, allocated to a warp in
# units of 8 per thread.  setmaxnreg (sm_90a) sets a warpgroup's per-thread count to a
# multiple of 8 in [24, 256] (PTX ISA 9.7.19.5 "setmaxnreg").
REGISTERS_PER_SM = 65536
MAX_REGS_PER_THREAD = 255
SETMAXNREG_RANGE = (24, 256, 8)     # (min, max, step)


# Tensor memory per SM on tcgen05 targets: 128 lanes x 512 columns of 32 bits.
TMEM_COLS = 512


def smem_limits(target: Target) -> tuple[int, int]:
    return SMEM_LIMITS.get(target.sm, (48 * 1024, 48 * 1024))


# Cache / eviction modifiers by access kind, as (rank, spelling): rank orders them in the
# opcode (ld.global.nc.L1::no_allocate.L2::256B.v4...).  Measured forms: ptx-reference §2.
CACHE_HINTS = {
    "load": {"nc": 0, "ca": 0, "cg": 0, "cs": 0, "lu": 0, "cv": 0,
             "L1::no_allocate": 1, "L1::evict_first": 1, "L1::evict_last": 1,
             "L1::evict_normal": 1, "L1::evict_unchanged": 1,
             "L2::64B": 2, "L2::128B": 2, "L2::256B": 2},
    "store": {"wb": 0, "cg": 0, "cs": 0, "wt": 0,
              "L1::no_allocate": 1, "L1::evict_first": 1, "L1::evict_last": 1,
              "L1::evict_normal": 1, "L1::evict_unchanged": 1},
}


def cache_modifiers(kind: str, hint, space: str) -> tuple[bool, str]:
    """(ok, '.nc.L1::no_allocate') for a hint (str or list) on a `kind` access to `space`;
    on failure (False, reason).  Hints exist for global memory only."""
    if not hint:
        return True, ""
    hints = [hint] if isinstance(hint, str) else list(hint)
    if space != "global":
        return False, (f"cache hints ({', '.join(hints)}) apply only to global "
                       f"{'loads' if kind == 'load' else 'stores'}; the "
                       f"{'source' if kind == 'load' else 'destination'} is {space}")
    table = CACHE_HINTS[kind]
    ranked = []
    for h in hints:
        if h not in table:
            return False, f"unknown {kind} cache hint {h!r}; use " + ", ".join(table)
        ranked.append((table[h], "." + h))
    ranks = [r for r, _ in ranked]
    if len(set(ranks)) != len(ranks):
        return False, f"cache hints {hints} set the same level twice"
    return True, "".join(m for _, m in sorted(ranked))
