"""The source texts of a launch's last steps, compiled into functions at run time.

``launcher.Launcher._submit`` and each Kernel's generated own-launch path
(``launcher.own_launch_path``) run the same tail: the stream as the binding takes it, the
parameters packed into the thread's storage, the launch and its error handling.  Writing it
once as text keeps the two paths from drifting apart.  Both paths compile it here, each with
the values and dims spelled its own way.
"""
from __future__ import annotations

from struct import error as struct_error

# Names the texts use: L is the Launcher, h the raw stream handle; sa, tls, launch, handle,
# extra and last are L's stream table, thread-local storage, launch function, function
# handle, extra argument and the driver's last-kernel slot, which both paths read before the
# tail.  Launcher._submit fills {values} with a list (tensor-map parameters appended) and
# {dims} with a tuple; the own-launch path with its checks' names and literals.
PACK = """\
    try:                            # this thread's parameter storage
        pack, buf, kp, _ = tls.p
    except AttributeError:
        pack, buf, kp, _ = L._thread_storage()
    try:
        pack(buf, 0, {values})
    except (struct_error, OverflowError, TypeError):
        L.binder.scalar_error([{values}])
        raise
"""
SUBMIT_TAIL = """\
    if sa is not None:              # the ctypes driver: the stream as a pointer argument
        try:
            h = sa[h]
        except KeyError:
            h = L._stream_arg(h)
""" + PACK + """\
    if not L._ask_first:
        err = launch(handle, {launch_dims}, {smem}, h, kp, extra)
        if err:
            L._relaunch(err, {dims}, {smem}, h, kp)
    else:
        L._launch_asking({dims}, {smem}, h, kp)
    last[0] = {name}
"""
# The own-launch path's tail where the binding has a bare cuLaunchKernelEx: sa is L's table of
# launch configs (own dims, dynamic shared memory, cluster) by raw stream handle and launch
# that function; the rare paths (a refused launch, asking first) take cuLaunchKernel's.
OWN_TAIL_EX = """\
    try:                            # the config of L's own launch on stream h
        cfg = sa[h]
    except KeyError:
        cfg = L._own_config(h)
""" + PACK + """\
    if not L._ask_first:
        err = launch(cfg, handle, kp, None)
        if err:
            L._relaunch(err, {dims}, {smem}, L._stream_of(h), kp)
    else:
        L._launch_asking({dims}, {smem}, L._stream_of(h), kp)
    last[0] = {name}
"""


def compiled(src: str, name: str, env: dict, where: str = ""):
    env = {"struct_error": struct_error, **env}
    exec(compile(src, f"<ptxgen {name}{' ' + where if where else ''}>", "exec"), env)
    fn = env[name]
    fn.source = src
    return fn


def make_submit():
    src = ("def _submit(L, values, dims, smem, h):\n"
           "    if L._builders:   # tensor maps: bytes from the bound values\n"
           "        values = values + [b(values) for b in L._builders]\n"
           "    sa, tls, launch, handle, extra, last = (L._streams, L._tls, L._launch, "
           "L.fn.handle, L._extra, L._last)\n" +
           SUBMIT_TAIL.format(values="*values", launch_dims="*dims", dims="dims",
                               smem="smem", name="L.name"))
    fn = compiled(src, "_submit", {})
    fn.__doc__ = ("The tail both launch paths share: the stream as the binding wants it, the "
                  "parameters packed into this thread's storage, the launch (and its error "
                  "handling).")
    return fn


__all__ = ["OWN_TAIL_EX", "PACK", "SUBMIT_TAIL", "compiled", "make_submit"]
