"""The source text of a launch's last steps, compiled into functions at run time.

``launcher.Launcher._submit`` and each Kernel's generated own-launch path
(``launcher.own_launch_path``) run the same tail: the parameters packed into the thread's
storage, the launch and its error handling.  Writing it once as text keeps the two paths from
drifting apart.  Both paths compile it here, each with the values and dims spelled its own way.
"""
from __future__ import annotations

from struct import error as struct_error

# Names the text uses: L is the Launcher, h the raw stream handle; tls, launch, handle and last
# are L's thread-local storage, launch function (cuLaunchKernel's signature and result tuple),
# function handle and the driver's last-kernel slot, which both paths read before the tail.
# Launcher._submit fills {values} with a list (tensor-map parameters appended) and {dims} with
# a tuple; the own-launch path with its checks' names and literals.
SUBMIT_TAIL = """\
    try:                            # this thread's parameter storage
        pack, buf, kp, _ = tls.p
    except AttributeError:
        pack, buf, kp, _ = L._thread_storage()
    try:
        pack(buf, 0, {values})
    except (struct_error, OverflowError, TypeError):
        L.binder.scalar_error([{values}])
        raise
    if not L._ask_first:
        err = launch(handle, {launch_dims}, {smem}, h, kp, 0)[0]
        if err:
            L._relaunch(err, {dims}, {smem}, h, kp)
    else:
        L._launch_asking({dims}, {smem}, h, kp)
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
           "    tls, launch, handle, last = L._tls, L._launch, L.fn.handle, L._last\n" +
           SUBMIT_TAIL.format(values="*values", launch_dims="*dims", dims="dims",
                               smem="smem", name="L.name"))
    fn = compiled(src, "_submit", {})
    fn.__doc__ = ("The tail both launch paths share: the parameters packed into this thread's "
                  "storage, the launch (and its error handling).")
    return fn


__all__ = ["SUBMIT_TAIL", "compiled", "make_submit"]
