/* A stand-in libcuda.so.1 for CPU tests of ptxgen's ctypes driver binding (and, through its
 * cuGetProcAddress_v2, of cuda-bindings): the entry points ptxgen binds, with the C
 * signatures of cuda.h 13.0, behaving enough like the driver for the runtime to load, launch
 * and check (per-thread context stacks, modules and functions of a context, "device" memory
 * from malloc).  Kernels do not run: launches are recorded for the test to read back with
 * the mock_* functions.  tests/_mockcuda.py builds it with the system C compiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct mctx { int device; } *CUcontext;
typedef struct mmod { CUcontext ctx; } *CUmodule;
typedef struct mfn { CUcontext ctx; char name[128]; int max_dyn; } *CUfunction;
typedef struct mstream { CUcontext ctx; } *CUstream;
typedef struct mevent { float t; } *CUevent;

enum { OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
       INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_FOUND = 500, ILLEGAL_ADDRESS = 700 };

#define MAX_DEV 4
static struct mctx primary[MAX_DEV] = {{0}, {1}, {2}, {3}};
static int n_devices = 1, initialized = 0, launch_result = 0, launches = 0;
static __thread CUcontext stack[16];
static __thread int depth = 0;

/* what the last launch saw */
typedef struct {
    void *f; unsigned grid[3], block[3], smem; void *stream; void **params; void **extra;
    int ex, num_attrs, attr_id; unsigned cluster[3];
    unsigned char blob[1024]; int blob_len;
} mock_launch_t;
static mock_launch_t last;
static int param_sizes[64], n_param_sizes = 0;

/* ---- the inspection API -------------------------------------------------------------- */
void mock_set_devices(int n) { n_devices = n < 0 ? 0 : n > MAX_DEV ? MAX_DEV : n; }
void mock_set_launch_result(int r) { launch_result = r; }
void mock_set_param_sizes(int n, const int *sizes) {
    n_param_sizes = n > 64 ? 64 : n;
    memcpy(param_sizes, sizes, sizeof(int) * n_param_sizes);
}
int mock_launch_count(void) { return launches; }
void mock_last_launch(mock_launch_t *out) { *out = last; }
int mock_sizeof_launch(void) { return (int)sizeof(mock_launch_t); }

static CUcontext current(void) { return depth ? stack[depth - 1] : NULL; }

/* ---- initialization, errors ---------------------------------------------------------- */
CUresult cuInit(unsigned int flags) { initialized = 1; return flags ? INVALID_VALUE : OK; }
CUresult cuDriverGetVersion(int *v) { if (!v) return INVALID_VALUE; *v = 13000; return OK; }

static const char *err_name(CUresult e) {
    switch (e) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    default: return NULL;
    }
}
CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = err_name(e);
    return *s ? OK : INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    *s = e == ILLEGAL_ADDRESS ? "an illegal memory access was encountered (mock)"
         : err_name(e) ? "mock driver error" : NULL;
    return *s ? OK : INVALID_VALUE;
}

/* ---- devices and contexts ------------------------------------------------------------ */
CUresult cuDeviceGetCount(int *n) { if (!initialized) return NOT_INITIALIZED; *n = n_devices; return OK; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= n_devices) return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (dev < 0 || dev >= n_devices) return INVALID_DEVICE;
    char tmp[32];
    strcpy(tmp, "Mock GPU 0");
    tmp[9] = (char)('0' + dev);
    strncpy(name, tmp, (size_t)len);
    if (len > 0) name[len - 1] = 0;
    return OK;
}
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    if (dev < 0 || dev >= n_devices) return INVALID_DEVICE;
    switch (attrib) {
    case 16: *pi = 132; break;                      /* MULTIPROCESSOR_COUNT */
    case 38: *pi = 50 << 20; break;                 /* L2_CACHE_SIZE */
    case 75: *pi = 9; break;                        /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *pi = 0; break;                        /* COMPUTE_CAPABILITY_MINOR */
    case 97: *pi = 232448; break;                   /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    default: *pi = attrib * 1000 + dev;             /* recognisable */
    }
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    if (dev < 0 || dev >= n_devices) return INVALID_DEVICE;
    *bytes = (size_t)80 << 30;
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    if (dev < 0 || dev >= n_devices) return INVALID_DEVICE;
    *pctx = &primary[dev];
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    return dev < 0 || dev >= n_devices ? INVALID_DEVICE : OK;
}
CUresult cuCtxGetCurrent(CUcontext *pctx) { *pctx = current(); return OK; }
CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (depth) stack[depth - 1] = ctx;
    else if (ctx) stack[depth++] = ctx;
    return OK;
}
CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    if (!ctx || depth == 16) return INVALID_VALUE;
    stack[depth++] = ctx;
    return OK;
}
CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    if (!depth) return INVALID_CONTEXT;
    CUcontext c = stack[--depth];
    if (pctx) *pctx = c;
    return OK;
}
CUresult cuCtxGetDevice(CUdevice *d) {
    if (!current()) return INVALID_CONTEXT;
    *d = current()->device;
    return OK;
}
CUresult cuCtxSynchronize(void) { return current() ? OK : INVALID_CONTEXT; }

/* ---- modules, functions -------------------------------------------------------------- */
CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    if (!current()) return INVALID_CONTEXT;
    if (!image) return INVALID_VALUE;
    *m = calloc(1, sizeof(struct mmod));
    (*m)->ctx = current();
    return OK;
}
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, int *options,
                            void **values) {
    /* writes a line into the info log (option 3, size option 4), as the JIT does */
    char *info = NULL; size_t cap = 0;
    for (unsigned i = 0; i < n; i++) {
        if (options[i] == 3) info = values[i];
        if (options[i] == 4) cap = (size_t)(uintptr_t)values[i];
    }
    if (info && cap) {
        strncpy(info, "mock JIT: compiled", cap);
        info[cap - 1] = 0;
        for (unsigned i = 0; i < n; i++)
            if (options[i] == 4) values[i] = (void *)(uintptr_t)strlen(info);
    }
    return cuModuleLoadData(m, image);
}
CUresult cuModuleUnload(CUmodule m) { if (!m) return INVALID_HANDLE; free(m); return OK; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    if (!m || m->ctx != current()) return INVALID_HANDLE;
    if (strncmp(name, "missing", 7) == 0) return NOT_FOUND;
    *f = calloc(1, sizeof(struct mfn));
    (*f)->ctx = m->ctx;
    strncpy((*f)->name, name, sizeof((*f)->name) - 1);
    return OK;
}
CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction f) {
    if (!f) return INVALID_HANDLE;
    *pi = attrib == 8 ? f->max_dyn : attrib == 4 ? 32 : 0;   /* MAX_DYNAMIC..., NUM_REGS */
    return OK;
}
CUresult cuFuncSetAttribute(CUfunction f, int attrib, int value) {
    if (!f) return INVALID_HANDLE;
    if (attrib == 8) f->max_dyn = value;
    return OK;
}

/* ---- launches ------------------------------------------------------------------------ */
static void record_params(void **params) {
    last.params = params;
    last.blob_len = 0;
    for (int i = 0; params && i < n_param_sizes; i++) {
        int s = param_sizes[i];
        if (last.blob_len + s > (int)sizeof(last.blob)) break;
        memcpy(last.blob + last.blob_len, params[i], (size_t)s);
        last.blob_len += s;
    }
}
static CUresult launch_check(CUfunction f, CUstream s) {
    if (!current()) return INVALID_CONTEXT;
    if (!f || f->ctx != current()) return INVALID_HANDLE;
    if ((uintptr_t)s > 2 && s->ctx != f->ctx) return INVALID_HANDLE;
    return OK;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                        void **extra) {
    CUresult r = launch_check(f, s);
    if (r) return r;
    memset(&last, 0, sizeof(last));
    last.f = f; last.grid[0] = gx; last.grid[1] = gy; last.grid[2] = gz;
    last.block[0] = bx; last.block[1] = by; last.block[2] = bz; last.smem = smem;
    last.stream = s; last.extra = extra;
    record_params(params);
    launches++;
    return launch_result;
}

typedef struct { int id; char pad[4]; union { char pad[64]; struct { unsigned x, y, z; } dim;
                 void *align; } value; } CUlaunchAttribute;
typedef struct { unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                 sharedMemBytes; CUstream hStream; CUlaunchAttribute *attrs;
                 unsigned numAttrs; } CUlaunchConfig;

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    CUresult r = launch_check(f, c->hStream);
    if (r) return r;
    memset(&last, 0, sizeof(last));
    last.f = f; last.ex = 1;
    last.grid[0] = c->gridDimX; last.grid[1] = c->gridDimY; last.grid[2] = c->gridDimZ;
    last.block[0] = c->blockDimX; last.block[1] = c->blockDimY; last.block[2] = c->blockDimZ;
    last.smem = c->sharedMemBytes; last.stream = c->hStream; last.extra = extra;
    last.num_attrs = (int)c->numAttrs;
    if (c->numAttrs && c->attrs) {
        last.attr_id = c->attrs[0].id;
        last.cluster[0] = c->attrs[0].value.dim.x;
        last.cluster[1] = c->attrs[0].value.dim.y;
        last.cluster[2] = c->attrs[0].value.dim.z;
        if (c->attrs[0].id == 4 && (c->gridDimX % c->attrs[0].value.dim.x)) return INVALID_VALUE;
    }
    record_params(params);
    launches++;
    return launch_result;
}

/* The map holds its arguments, one 64-bit word each, so a test can read back what arrived:
 * dataType, rank, address, dims[5], strides[4], box[5] and element strides[5] packed as
 * 32-bit pairs, interleave/swizzle/l2/oob in the last word.  The driver API says the map's
 * address must be 64-byte aligned: a misaligned one is counted (cuda-bindings' CUtensorMap
 * objects sit at 32 mod 64, which real drivers accept), not refused. */
static int misaligned_maps = 0;
int mock_misaligned_maps(void) { return misaligned_maps; }
CUresult cuTensorMapEncodeTiled(void *map, int dt, uint32_t rank, void *addr,
                                const uint64_t *dims, const uint64_t *strides,
                                const uint32_t *box, const uint32_t *estrides, int interleave,
                                int swizzle, int l2, int oob) {
    if (!map) return INVALID_VALUE;
    if ((uintptr_t)map & 63) misaligned_maps++;
    if (rank < 1 || rank > 5 || ((uintptr_t)addr & 15)) return INVALID_VALUE;
    uint64_t w[16] = {0};
    w[0] = (uint64_t)dt; w[1] = rank; w[2] = (uint64_t)(uintptr_t)addr;
    for (uint32_t i = 0; i < rank; i++) w[3 + i] = dims[i];
    for (uint32_t i = 0; i + 1 < rank && i < 3; i++) w[8 + i] = strides[i];
    for (uint32_t i = 0; i < rank && i < 4; i++) w[11 + i] = ((uint64_t)box[i] << 32) | estrides[i];
    w[15] = (uint64_t)interleave | ((uint64_t)swizzle << 16) | ((uint64_t)l2 << 32) |
            ((uint64_t)oob << 48);
    memcpy(map, w, 128);
    return OK;
}

/* ---- streams, pointers, memory, events ----------------------------------------------- */
CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
    if (!current()) return INVALID_CONTEXT;
    *s = calloc(1, 64);     /* > 2: never one of the special handles */
    (*s)->ctx = current();
    (void)flags;
    return OK;
}
CUresult cuStreamDestroy_v2(CUstream s) { if ((uintptr_t)s <= 2) return INVALID_HANDLE; free(s); return OK; }
CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) {
    if ((uintptr_t)s <= 2) { *pctx = current(); return current() ? OK : INVALID_CONTEXT; }
    *pctx = s->ctx;
    return OK;
}
CUresult cuStreamSynchronize(CUstream s) { (void)s; return current() ? OK : INVALID_CONTEXT; }

#define MAX_ALLOC 256
static struct { CUdeviceptr base; size_t size; int dev; } allocs[MAX_ALLOC];
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (!current()) return INVALID_CONTEXT;
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOC; i++)
        if (!allocs[i].base) {
            allocs[i].base = (CUdeviceptr)(uintptr_t)m; allocs[i].size = n;
            allocs[i].dev = current()->device;
            break;
        }
    *p = (CUdeviceptr)(uintptr_t)m;
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    for (int i = 0; i < MAX_ALLOC; i++)
        if (allocs[i].base == p) { allocs[i].base = 0; free((void *)(uintptr_t)p); return OK; }
    return INVALID_VALUE;
}
CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) { *free_ = (size_t)79 << 30; *total = (size_t)80 << 30; return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return OK; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return OK; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) { (void)st; memset((void *)(uintptr_t)d, v, n); return OK; }
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    for (int i = 0; i < MAX_ALLOC; i++)
        if (allocs[i].base && allocs[i].base <= p && p < allocs[i].base + allocs[i].size) {
            if (attr == 9) { *(int *)data = allocs[i].dev; return OK; }          /* ordinal */
            if (attr == 11) { *(CUdeviceptr *)data = allocs[i].base; return OK; } /* start */
            if (attr == 12) { *(size_t *)data = allocs[i].size; return OK; }      /* size */
            return INVALID_VALUE;
        }
    return INVALID_VALUE;
}
CUresult cuEventCreate(CUevent *e, unsigned int flags) { (void)flags; *e = calloc(1, sizeof(struct mevent)); return OK; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)s; static float t = 0; e->t = (t += 0.25f); return OK; }
CUresult cuEventSynchronize(CUevent e) { return e ? OK : INVALID_HANDLE; }
/* only the _v2 name (CUDA 12.8+), as a newer driver's cuda.h maps it */
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { *ms = b->t - a->t; return OK; }
CUresult cuEventDestroy_v2(CUevent e) { free(e); return OK; }

/* ---- for cuda-bindings: every entry point by its API name --------------------------- */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                             int *status) {
    static void *self = NULL;
    Dl_info info;
    (void)version; (void)flags;
    if (!self && dladdr((void *)cuGetProcAddress_v2, &info)) self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    char name[160];
    snprintf(name, sizeof(name), "%s_v2", symbol);
    *pfn = self ? dlsym(self, name) : NULL;
    if (!*pfn && self) *pfn = dlsym(self, symbol);
    if (status) *status = *pfn ? 0 : 1;     /* CU_GET_PROC_ADDRESS_SUCCESS / SYMBOL_NOT_FOUND */
    return *pfn ? OK : NOT_FOUND;
}
