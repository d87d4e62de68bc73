/* A NumPy data-memory handler that keeps freed large buffers for reuse.
 *
 * glibc hands large blocks back to the OS when they are freed (mmap/munmap), so each
 * fresh large temporary faults all of its pages in again. This handler keeps freed
 * blocks of at least `min_cached` bytes (sizes rounded up to 4 KiB, one size class per
 * rounded size) in a small cache holding at most `max_bytes`; an allocation of the same
 * class takes a cached block, whose pages are already mapped. Smaller blocks go straight
 * to malloc/free.
 *
 * Every block carries a header just before the pointer handed out, recording the size
 * asked for, the usable capacity and the offset back to what malloc returned. Large
 * blocks are 64-byte aligned, small ones 16-byte (as malloc). The allocator functions
 * never touch Python; the cache is guarded by a pthread mutex because NumPy may
 * allocate and free without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PAGE ((size_t)4096)
#define ALIGN ((size_t)64)
#define MAX_ENTRIES 1024 /* cached blocks at most; each is >= 4 KiB, usually >= 256 KiB */

typedef struct {
    size_t size;   /* bytes asked for */
    size_t cap;    /* usable bytes after the header: the size class for large blocks */
    size_t offset; /* user pointer - pointer from malloc */
    size_t large;  /* 1: a 64-byte aligned block of a size class, may be cached */
} header;

/* room for the header before the pointer; small blocks keep malloc's 16-byte alignment */
#define HDR ((sizeof(header) + 15) & ~(size_t)15)
/* large blocks: header + slack to move the pointer up to a 64-byte boundary */
#define LARGE_PAD (HDR + ALIGN)

typedef struct {
    void *ptr; /* user pointer */
    size_t cap;
} entry;

static struct {
    pthread_mutex_t lock;
    entry entries[MAX_ENTRIES]; /* oldest first */
    size_t count;
    size_t cached_bytes;
    size_t max_bytes;
    size_t min_cached; /* a multiple of PAGE */
    int active;        /* 0: free releases every block (after uninstall) */
    unsigned long long hits, misses, evictions, dropped;
    size_t peak_bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .max_bytes = (size_t)512 << 20,
           .min_cached = (size_t)256 << 10};

static inline header *hdr_of(void *ptr) { return (header *)((char *)ptr - sizeof(header)); }

static inline size_t min_cached_now(void) {
    return __atomic_load_n(&cache.min_cached, __ATOMIC_RELAXED);
}

/* the size class of a large request; 0 when it does not fit in size_t */
static inline size_t round_class(size_t size) {
    if (size > SIZE_MAX - PAGE - LARGE_PAD) {
        return 0;
    }
    return (size + PAGE - 1) & ~(PAGE - 1);
}

static void *place_small(void *raw, size_t size) {
    if (raw == NULL) {
        return NULL;
    }
    void *ptr = (char *)raw + HDR;
    header *h = hdr_of(ptr);
    h->size = size;
    h->cap = size;
    h->offset = HDR;
    h->large = 0;
    return ptr;
}

static void *place_large(void *raw, size_t size, size_t cap) {
    if (raw == NULL) {
        return NULL;
    }
    uintptr_t p = ((uintptr_t)raw + HDR + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
    void *ptr = (void *)p;
    header *h = hdr_of(ptr);
    h->size = size;
    h->cap = cap;
    h->offset = (size_t)(p - (uintptr_t)raw);
    h->large = 1;
    return ptr;
}

static inline void release(void *ptr) { free((char *)ptr - hdr_of(ptr)->offset); }

/* a cached block of exactly `cap` bytes, newest first; NULL when there is none */
static void *take(size_t cap) {
    void *ptr = NULL;
    pthread_mutex_lock(&cache.lock);
    for (size_t i = cache.count; i-- > 0;) {
        if (cache.entries[i].cap == cap) {
            ptr = cache.entries[i].ptr;
            memmove(&cache.entries[i], &cache.entries[i + 1],
                    (cache.count - i - 1) * sizeof(entry));
            cache.count--;
            cache.cached_bytes -= cap;
            break;
        }
    }
    if (ptr != NULL) {
        cache.hits++;
    } else {
        cache.misses++;
    }
    pthread_mutex_unlock(&cache.lock);
    return ptr;
}

/* drops the oldest entries (into victims) until `room` more bytes and one more entry fit
 * under the limits; the caller holds the lock and frees the victims after unlocking */
static size_t evict_for(size_t room, void **victims) {
    size_t k = 0;
    while (k < cache.count &&
           (cache.count - k >= MAX_ENTRIES || cache.cached_bytes + room > cache.max_bytes)) {
        victims[k] = cache.entries[k].ptr;
        cache.cached_bytes -= cache.entries[k].cap;
        k++;
    }
    if (k > 0) {
        memmove(&cache.entries[0], &cache.entries[k], (cache.count - k) * sizeof(entry));
        cache.count -= k;
        cache.evictions += k;
    }
    return k;
}

static void free_all(void **victims, size_t n) {
    for (size_t i = 0; i < n; i++) {
        release(victims[i]);
    }
}

/* ---- the handler's functions ---------------------------------------------------------- */

/* a block of `size` bytes, zeroed when `zero`: small ones from the system, large ones
 * from the cache when it holds one of their size class */
static void *allocate(size_t size, int zero) {
    if (size < min_cached_now()) {
        if (size > SIZE_MAX - HDR) {
            return NULL;
        }
        return place_small(zero ? calloc(1, HDR + size) : malloc(HDR + size), size);
    }
    size_t cap = round_class(size);
    if (cap == 0) {
        return NULL;
    }
    void *ptr = take(cap);
    if (ptr != NULL) {
        hdr_of(ptr)->size = size;
        if (zero) {
            memset(ptr, 0, size);
        }
        return ptr;
    }
    size_t total = cap + LARGE_PAD;
    return place_large(zero ? calloc(1, total) : malloc(total), size, cap);
}

static void *sf_malloc(void *ctx, size_t size) {
    (void)ctx;
    return allocate(size, 0);
}

static void *sf_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;
    if (elsize != 0 && nelem > SIZE_MAX / elsize) {
        return NULL;
    }
    return allocate(nelem * elsize, 1);
}

static void sf_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size; /* the header knows */
    if (ptr == NULL) {
        return;
    }
    header *h = hdr_of(ptr);
    if (!h->large) {
        release(ptr);
        return;
    }
    size_t cap = h->cap;
    void *victims[MAX_ENTRIES];
    size_t n = 0;
    int keep = 0;
    pthread_mutex_lock(&cache.lock);
    if (cache.active && cap >= cache.min_cached && cap <= cache.max_bytes) {
        n = evict_for(cap, victims);
        cache.entries[cache.count].ptr = ptr;
        cache.entries[cache.count].cap = cap;
        cache.count++;
        cache.cached_bytes += cap;
        if (cache.cached_bytes > cache.peak_bytes) {
            cache.peak_bytes = cache.cached_bytes;
        }
        keep = 1;
    } else {
        cache.dropped++;
    }
    pthread_mutex_unlock(&cache.lock);
    free_all(victims, n);
    if (!keep) {
        release(ptr);
    }
}

static void *sf_realloc(void *ctx, void *ptr, size_t new_size) {
    if (ptr == NULL) {
        return sf_malloc(ctx, new_size);
    }
    header *h = hdr_of(ptr);
    size_t min_cached = min_cached_now();
    if (!h->large && new_size < min_cached) {
        /* small to small: the system realloc moves the header along with the data */
        if (new_size > SIZE_MAX - HDR) {
            return NULL;
        }
        void *raw = realloc((char *)ptr - HDR, HDR + new_size);
        return place_small(raw, new_size);
    }
    if (h->large && new_size >= min_cached && round_class(new_size) == h->cap) {
        h->size = new_size; /* same size class: stays in place */
        return ptr;
    }
    void *out = sf_malloc(ctx, new_size);
    if (out == NULL) {
        return NULL; /* the old block stays valid, as with realloc */
    }
    size_t keep = h->size < new_size ? h->size : new_size;
    memcpy(out, ptr, keep);
    sf_free(ctx, ptr, h->size);
    return out;
}

static PyDataMem_Handler handler = {
    "shapeflow_buffer_cache",
    1,
    {NULL, sf_malloc, sf_calloc, sf_realloc, sf_free},
};

/* ---- module functions ----------------------------------------------------------------- */

static PyObject *capsule;      /* this handler, made once */
static PyObject *previous;     /* the handler install() replaced, or NULL */
static int installed;

/* releases the cached blocks smaller than min_cap (all of them with SIZE_MAX) */
static void drop_entries(size_t min_cap) {
    void *victims[MAX_ENTRIES];
    size_t n = 0;
    pthread_mutex_lock(&cache.lock);
    size_t kept = 0;
    for (size_t i = 0; i < cache.count; i++) {
        if (cache.entries[i].cap < min_cap) {
            victims[n++] = cache.entries[i].ptr;
            cache.cached_bytes -= cache.entries[i].cap;
        } else {
            cache.entries[kept++] = cache.entries[i];
        }
    }
    cache.count = kept;
    pthread_mutex_unlock(&cache.lock);
    free_all(victims, n);
}

static void clear_all(void) { drop_entries(SIZE_MAX); }

/* fork while another thread holds the lock: the child would wait on it forever */
static void fork_prepare(void) { pthread_mutex_lock(&cache.lock); }
static void fork_done(void) { pthread_mutex_unlock(&cache.lock); }

static PyObject *mod_install(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long max_bytes, min_cached;
    if (!PyArg_ParseTuple(args, "KK:install", &max_bytes, &min_cached)) {
        return NULL;
    }
    if (min_cached < 1 || min_cached > SIZE_MAX / 2 || max_bytes > SIZE_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "min_cached must be >= 1 and both limits sane");
        return NULL;
    }
    size_t min_cap = ((size_t)min_cached + PAGE - 1) & ~(PAGE - 1);
    void *victims[MAX_ENTRIES];
    size_t n;
    pthread_mutex_lock(&cache.lock);
    cache.max_bytes = (size_t)max_bytes;
    __atomic_store_n(&cache.min_cached, min_cap, __ATOMIC_RELAXED);
    cache.active = 1;
    n = evict_for(0, victims); /* fit the cache under a lower max_bytes */
    pthread_mutex_unlock(&cache.lock);
    free_all(victims, n);
    drop_entries(min_cap); /* blocks below a raised min_cached would never be taken */

    PyObject *current = PyDataMem_GetHandler();
    if (current == NULL) {
        return NULL;
    }
    int ours = current == capsule;
    Py_DECREF(current);
    if (!ours) {
        PyObject *old = PyDataMem_SetHandler(capsule);
        if (old == NULL) {
            return NULL;
        }
        if (installed) {
            Py_DECREF(old); /* keep the handler from the first install */
        } else {
            previous = old;
            installed = 1;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *mod_uninstall(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (installed) {
        PyObject *old = PyDataMem_SetHandler(previous);
        if (old == NULL) {
            return NULL;
        }
        Py_DECREF(old);
        Py_CLEAR(previous);
        installed = 0;
    }
    pthread_mutex_lock(&cache.lock);
    cache.active = 0; /* blocks still in use are released when freed */
    pthread_mutex_unlock(&cache.lock);
    clear_all();
    Py_RETURN_NONE;
}

static PyObject *mod_clear(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    clear_all();
    Py_RETURN_NONE;
}

static PyObject *mod_stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pthread_mutex_lock(&cache.lock);
    unsigned long long hits = cache.hits, misses = cache.misses, evictions = cache.evictions;
    unsigned long long dropped = cache.dropped;
    size_t bytes = cache.cached_bytes, blocks = cache.count, peak = cache.peak_bytes;
    size_t max_bytes = cache.max_bytes, min_cached = cache.min_cached;
    int active = cache.active;
    pthread_mutex_unlock(&cache.lock);
    return Py_BuildValue("{s:K,s:K,s:n,s:n,s:K,s:K,s:n,s:n,s:n,s:O}", "hits", hits, "misses",
                         misses, "cached_bytes", (Py_ssize_t)bytes, "cached_blocks",
                         (Py_ssize_t)blocks, "evictions", evictions, "dropped", dropped,
                         "peak_cached_bytes", (Py_ssize_t)peak, "max_bytes",
                         (Py_ssize_t)max_bytes, "min_cached", (Py_ssize_t)min_cached,
                         "installed", installed && active ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"install", mod_install, METH_VARARGS,
     "install(max_bytes, min_cached): make the buffer cache NumPy's handler in this context."},
    {"uninstall", mod_uninstall, METH_NOARGS,
     "uninstall(): restore the previous handler and release every cached block."},
    {"clear", mod_clear, METH_NOARGS, "clear(): release every cached block."},
    {"stats", mod_stats, METH_NOARGS, "stats(): the cache's counters and limits as a dict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_alloc", "A NumPy data-memory handler caching large buffers.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__alloc(void) {
    import_array();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (capsule == NULL) {
        capsule = PyCapsule_New(&handler, "mem_handler", NULL);
        if (capsule == NULL) {
            Py_DECREF(m);
            return NULL;
        }
        pthread_atfork(fork_prepare, fork_done, fork_done);
    }
    if (PyModule_AddStringConstant(m, "HANDLER_NAME", handler.name) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
