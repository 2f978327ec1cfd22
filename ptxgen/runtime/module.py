"""CUmodule ownership: load PTX or a cubin into a device's primary context, look up entries.

Modules go into the primary context (not a private one) so that tensors and streams made by
torch or cupy on that device are valid for our kernels.  A module is unloaded by
``unload()`` or, failing that, when it is collected (``weakref.finalize``), so a long-running
process that builds and drops kernels does not leak device memory.
"""
from __future__ import annotations

import threading
import weakref

from ..errors import CudaError, LaunchError
from ..target.table import DYNAMIC_SMEM_DEFAULT
from . import cache, driver
from .compile import compile_error, dump

_JIT_FAILURES = {"CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                 "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
                 "CUDA_ERROR_INVALID_IMAGE"}
_LOG_BYTES = 1 << 16


def _unload(handle, ctx, name) -> None:
    """Finalizer body: best effort, since at interpreter exit the driver may be gone."""
    try:
        d = driver.drv()
        with driver.context_scope(ctx):
            d.cuModuleUnload(handle)
    except Exception:
        pass


class Module:
    """A loaded CUmodule.  Build with ``Module.load``; functions keep their module alive."""

    def __init__(self, handle, ctx, device: int, name: str):
        self.handle, self.ctx, self.device, self.name = handle, ctx, device, name
        # weak: a Function keeps its Module alive, not the other way round (no cycle)
        self._functions: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._finalizer = weakref.finalize(self, _unload, handle, ctx, name)
        self._finalizer.atexit = False  # process exit frees modules; a faulted context may hang

    @classmethod
    def load(cls, *, ptx: str | None = None, cubin: bytes | None = None, name: str,
             line_origin=None, device: int | None = None) -> "Module":
        """Load a cubin (preferred: assembled offline by ``compile_ptx``) or PTX (JIT-compiled
        by the driver for this device).  ``device`` defaults to the current context's device."""
        if (ptx is None) == (cubin is None):
            raise ValueError("Module.load takes exactly one of ptx= or cubin=")
        d = driver.drv()
        dev = driver.current_device() if device is None else device
        ctx = driver.primary_context(dev)
        with driver.context_scope(ctx):
            if cubin is not None:
                handle = driver.check(d.cuModuleLoadData(bytes(cubin)), "cuModuleLoadData", name)
            else:
                handle = cls._load_ptx(d, ptx, name, line_origin, dev)
        cache.bump("module_loads")
        return cls(handle, ctx, dev, name)

    @staticmethod
    def _load_ptx(d, ptx: str, name: str, line_origin, dev: int):
        dump(name, ".ptx", ptx)
        cache.bump("driver_jit")
        err_buf, info_buf = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)
        J = d.CUjit_option
        opts = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                J.CU_JIT_LOG_VERBOSE]
        vals = [err_buf, _LOG_BYTES, info_buf, _LOG_BYTES, 1]
        image = ptx.encode() + b"\0"  # the driver reads PTX as a C string
        err, handle = d.cuModuleLoadDataEx(image, len(opts), opts, vals)
        if not err:
            return handle
        log = bytes(err_buf).split(b"\0", 1)[0].decode(errors="replace")
        if driver.error_name(d, err) in _JIT_FAILURES or log.strip():
            try:
                arch = driver.device_arch(dev)
            except CudaError:
                arch = "sm_??"
            raise compile_error(
                ptx, arch, log or driver.error_name(d, err), name=name, line_origin=line_origin,
                headline=f"the driver's PTX JIT rejected kernel '{name}' for {arch} "
                         f"({driver.error_name(d, err)}):")
        raise driver.error(err, "cuModuleLoadDataEx", name)

    def function(self, entry: str) -> "Function":
        """The kernel ``entry`` (its ``.entry`` name in the PTX); cached per module."""
        fn = self._functions.get(entry)
        if fn is None:
            if not self._finalizer.alive:
                raise CudaError(f"module '{self.name}' was unloaded; load it again")
            d = driver.drv()
            with driver.context_scope(self.ctx):
                err, h = d.cuModuleGetFunction(self.handle, entry.encode())
            if err:
                raise driver.error(err, f"cuModuleGetFunction('{entry}')", self.name,
                                   hint=f"the module has no .entry named '{entry}'")
            fn = self._functions[entry] = Function(self, h, entry)
        return fn

    def unload(self) -> None:
        """Unload now (idempotent; checked, unlike the collection-time fallback).  Functions of
        this module fail cleanly if launched after (their handles are nulled)."""
        for fn in list(self._functions.values()):
            fn.handle = type(fn.handle)(0)
        self._functions.clear()
        if self._finalizer.detach() is None:
            return
        d = driver.drv()
        with driver.context_scope(self.ctx):
            driver.check(d.cuModuleUnload(self.handle), "cuModuleUnload", self.name)

    @property
    def loaded(self) -> bool:
        return self._finalizer.alive

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "unloaded"
        return f"<ptxgen Module '{self.name}' on cuda:{self.device} ({state})>"


class Function:
    """A CUfunction plus what launches need to know about it (context, the dynamic shared
    memory limit already raised), shared by every Launcher of that kernel."""

    def __init__(self, module: Module, handle, entry: str):
        self.module, self.handle, self.entry = module, handle, entry
        self.ctx, self.device = module.ctx, module.device
        self.max_dynamic_smem = DYNAMIC_SMEM_DEFAULT   # what a launch may use without opting in
        self._lock = threading.Lock()

    def ensure_dynamic_smem(self, nbytes: int, kernel: str) -> None:
        """Opt in to more dynamic shared memory than the default, once per new maximum."""
        if nbytes <= self.max_dynamic_smem:
            return
        with self._lock:
            if nbytes <= self.max_dynamic_smem:
                return
            d = driver.drv()
            limit = driver.device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", self.device)
            with driver.context_scope(self.ctx):
                static = self.attribute("SHARED_SIZE_BYTES")
                if nbytes + static > limit:
                    raise LaunchError(
                        f"kernel '{kernel}': {nbytes} bytes of dynamic shared memory plus "
                        f"{static} static exceed the device's limit of {limit} bytes per block")
                attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                driver.check(d.cuFuncSetAttribute(self.handle, attr, nbytes),
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", kernel)
            self.max_dynamic_smem = nbytes

    def attribute(self, name: str) -> int:
        """cuFuncGetAttribute by short name: "NUM_REGS", "SHARED_SIZE_BYTES", ..."""
        d = driver.drv()
        attr = getattr(d.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
        return int(driver.check(d.cuFuncGetAttribute(attr, self.handle),
                                f"cuFuncGetAttribute({name})", self.entry))

    def __repr__(self) -> str:
        return f"<ptxgen Function '{self.entry}' of {self.module!r}>"
