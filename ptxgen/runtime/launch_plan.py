"""How a traced ``pg.Kernel`` is compiled and launched: its parameter specs, one Binder for
every device, a Launcher per device (built, assembled and loaded on the first launch there),
its tensor-map parameters and the generated fast launch.

The builder only traces and builds PTX; it reaches this module through one lazy hook on the
first ``compile()``, ``params`` or launch, so ``import ptxgen`` loads no runtime.
"""
from __future__ import annotations

import sys
from _thread import RLock

from . import driver
from .args import ROW_MAJOR, Binder, ParamSpec
from .compile import compile_ptx
from .launcher import Launcher, own_launch_path, own_target
from .module import Module
from .tensormap import TensorMapBuilder


def param_specs(func) -> list:
    """The ParamSpecs a launch binds, from the traced PrimFunc's parameters (tensor-map
    parameters are built per launch, never bound: ``LaunchPlan.tensor_maps``)."""
    out = []
    for p in func.params:
        if p.kind == "tmap":
            continue
        if p.kind == "tensor":
            b = p.buffer
            shape = tuple(s if isinstance(s, int) else s.name for s in b.shape)   # symbols: names
            out.append(ParamSpec(p.name, "tensor", b.dtype.name, ".u64", shape,
                                 expected_strides(b), b.align))
        else:
            out.append(ParamSpec(p.name, p.kind, p.var.dtype.name, "." + p.var.dtype.ptx.param))
    return out


def expected_strides(b):
    """The element strides a launch must pass for buffer ``b``: row-major unless a layout
    says otherwise (then a constant tuple, computed once here rather than per launch)."""
    if b.layout is None:
        return ROW_MAJOR
    lay, shape = b.layout, b.shape
    if not all(isinstance(s, int) for s in shape):
        return None
    zero = [0] * len(shape)
    base = lay.apply(*zero, shape=shape)["m"]
    out = []
    for d in range(len(shape)):
        if shape[d] == 1:
            out.append(None)
            continue
        c = list(zero)
        c[d] = 1
        out.append(lay.apply(*c, shape=shape)["m"] - base)
    return tuple(out)


def compile_built(built, arch: str):
    """Assemble a kernel's build offline (nvJitLink), its PTX errors pointing at the IR."""
    return compile_ptx(built.text, arch, name=built.entry, line_origin=built.origin)


class LaunchPlan:
    """One kernel's launch state.  ``build(arch)`` returns its build (text, entry, origin,
    codegen); ``check_dims(grid, block)`` refuses launch dims the trace relied on otherwise.

    ``fast`` is the generated launch for torch tensors with no options (None until the first
    such launch; False: none, the general path only), ``fast_targets`` what it reads per device.
    """

    def __init__(self, name: str, func, build, *, grid_fn=None, cluster=None,
                 check_dims=None):
        self.name, self.func, self.build = name, func, build
        self.grid_fn, self.cluster, self.check_dims = grid_fn, cluster, check_dims
        self.params = param_specs(func)
        self.lock = RLock()          # _thread's: threading.RLock is a Python-level wrapper
        self.launchers: dict = {}    # device (-2 - device with debug_bounds) -> Launcher
        self.bind = self.binder = None
        self.fast = None
        self.fast_targets: dict = {}   # device -> its Launcher's own_target, once it suits
        self.fast_key = None         # the dims and dynamic smem the fast launch was made for

    def call(self, args, kw, debug: bool, sync_record=None) -> None:
        """The general launch: every option, every argument kind, every error.  With
        `sync_record` (sync debug mode: the record's layout), bounded waits: the launch
        synchronizes and a hang raises SyncError (runtime/syncdebug)."""
        grid, block = kw.pop("grid", None), kw.pop("block", None)
        stream, dynamic_smem_bytes = kw.pop("stream", None), kw.pop("dynamic_smem_bytes", None)
        values, user, dev = (self.bind or self.make_binder())(args, kw)
        if dev < 0:
            dev = driver.current_device()
        key = dev if not debug else -2 - dev    # debug-bounds builds: keys < 0
        func = self.func
        if sync_record is not None:
            from .syncdebug import sync_launch
            skey = ("sync", key)
            launcher = self.launchers.get(skey) or self.launcher_for(dev, skey)
            sites = self.build(driver.device_arch(dev)).codegen.func.attrs["sync_sites"]
            return sync_launch(launcher, sites, sync_record, values, user,
                               (self.grid_fn or func.grid) if grid is None else grid,
                               block or func.block, stream, dynamic_smem_bytes)
        if block is None and grid is None:
            launcher = self.launchers.get(key) or self.launcher_for(dev, key)
            if stream is None and dynamic_smem_bytes is None and self.grid_fn is None:
                launcher.launch_own(values, user)       # constant dims: resolved once
                if key >= 0 and dev not in self.fast_targets:
                    self.offer_fast(dev, launcher)
            else:
                launcher.launch(values, user, self.grid_fn or func.grid, func.block,
                                stream, dynamic_smem_bytes)
            return
        if self.check_dims is not None:
            self.check_dims(grid, block)
        launcher = self.launchers.get(key) or self.launcher_for(dev, key)
        launcher.launch(values, user, (self.grid_fn or func.grid) if grid is None else grid,
                        func.block if block is None else block, stream, dynamic_smem_bytes)

    def prepare(self, args, kw, launch, debug_flags):
        """A launch for arguments like ``args`` with the launch options in ``kw``, every value
        but the inputs resolved now (``Launcher.prepared``): checks as a launch makes them,
        the device's build and module, dims, shared memory, stream.  ``launch`` is the
        kernel's own call, which the prepared launch falls back on (``general``: the same
        options, the prepared symbols by keyword) while any of ``debug_flags`` ((mapping,
        key) pairs: the debug modes that change a build) is on."""
        kw = dict(kw)
        opts = {k: kw.pop(k, None) for k in ("grid", "block", "stream", "dynamic_smem_bytes")}
        opts = {k: v for k, v in opts.items() if v is not None}   # None: the kernel's own
        values, user, dev = (self.bind or self.make_binder())(args, kw)
        if dev < 0:
            dev = driver.current_device()
        if self.check_dims is not None:
            self.check_dims(opts.get("grid"), opts.get("block"))
        launcher = self.launchers.get(dev) or self.launcher_for(dev, dev)
        symbols = {p.name: values[i] for i, p in enumerate(self.params) if p.kind == "symbol"}

        def general(*inputs):
            return launch(*inputs, **opts, **symbols)
        f = self.func
        return launcher.prepared(values, user, opts.get("grid", self.grid_fn or f.grid),
                                 opts.get("block", f.block), opts.get("stream"),
                                 opts.get("dynamic_smem_bytes"), general, debug_flags)

    def offer_fast(self, dev: int, launcher) -> None:
        """After a launch with no options on ``dev``: the generated fast launch
        (``own_launch_path``) takes that device's launches from now on if its Launcher
        has constant dims, packs no tensor maps and shares the dims and dynamic shared memory
        of the first such device (a device that does not is recorded as None: the general
        path).  Generated on the first such device, for the tensor type the binder's checks
        were specialized for (torch's); without those checks the device is recorded as None."""
        spec = self.binder.specialized_for
        if spec is None or self.bind == self.binder.bind_device:
            self.fast_targets[dev] = None       # no torch checks: the general path, asked once
            return
        own = (launcher._own_dims, launcher.dynamic_smem_bytes)
        with self.lock:
            if self.fast is None and own[0] is not None and not launcher._builders:
                self.fast = own_launch_path(self.binder, self.fast_targets, *own, *spec,
                                            self.name) or False
                self.fast_key = own
            ok = self.fast and own == self.fast_key and not launcher._builders
            self.fast_targets[dev] = own_target(launcher) if ok else None

    def make_binder(self):
        """One Binder for every device: checks do not depend on where the kernel runs.  With
        torch imported, its bind is the one generated for torch tensors of this signature."""
        with self.lock:
            if self.binder is None:
                self.binder = Binder(self.params, name=self.name, resolve=driver.pointer_device)
            if self.bind is None or self.bind == self.binder.bind_device:
                self.bind = self.binder.specialize_for_torch() or self.binder.bind_device
        return self.bind

    def launcher_for(self, dev: int, key: int):
        """Build (per arch), assemble (memory/disk cubin cache: a second process loads the
        cached cubin without any JIT) and load (per device) on the first launch there."""
        with self.lock:
            launcher = self.launchers.get(key)
            if launcher is None:
                arch = driver.device_arch(dev)
                b = self.build(arch)
                res = compile_ptx(b.text, arch, name=b.entry, line_origin=b.origin)
                # nvJitLink compiles relocatable code, which drops whole-program instructions
                # (setmaxnreg): such a kernel is JIT-compiled from its PTX by the driver
                code = {"ptx": b.text} if b.codegen.whole_program else {"cubin": res.cubin}
                mod = Module.load(**code, name=b.entry, line_origin=b.origin, device=dev)
                f = self.func        # the arena/pool size is fixed when tracing
                specs, builders = self.tensor_maps(b)
                launcher = Launcher(
                    mod.function(b.entry), self.params + specs, name=self.name,
                    binder=self.binder,
                    dynamic_smem_bytes=max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0),
                    min_dynamic_smem_bytes=f.dynamic_smem_bytes, param_builders=builders,
                    cluster=self.cluster,
                    programmatic=bool(f.attrs.get("dependent_launch")),
                    grid=self.grid_fn or f.grid, block=f.block)
                launcher.module = mod
                self.launchers[key] = launcher
        if self.bind == self.binder.bind_device and "torch" in sys.modules:
            self.make_binder()      # torch was imported after the first launch
        return launcher

    def tensor_maps(self, built):
        """(ParamSpecs, per-launch builders) of the tensor-map parameters; a map the build
        for this arch does not use (no TMA copy chose it) packs zeros."""
        used = built.codegen.func.attrs.get("tensor_maps_used", ())
        specs, builders = [], []
        for p in self.func.params:
            if p.kind == "tmap":
                specs.append(ParamSpec(p.name, "tmap", "uint8", ".b8", (128,)))
                builders.append(TensorMapBuilder(p.spec, self.params, kernel=self.name,
                                                 used=p.var.uid in used))
        return specs, builders

    def unload(self) -> None:
        self.fast_targets.clear()
        for launcher in self.launchers.values():
            launcher.module.unload()
        self.launchers.clear()


__all__ = ["LaunchPlan", "compile_built", "expected_strides", "param_specs"]
