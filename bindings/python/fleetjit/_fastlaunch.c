/* _fastlaunch: the compiled launch path of the fleetjit Python binding.
 *
 * One call packs a launch's arguments into an fj_arg array on the C stack
 * and calls fj_launch, with no ctypes object and no DLPack capsule per
 * launch; each runtime.Kernel's `launch` is this module's, bound to the
 * kernel (bind(), Launcher below), so a launch runs no Python code. It
 * handles the arguments that hot loops pass: Python int (int32) and float
 * (float32), fleetjit Scalars, NumPy scalars, torch tensors
 * (data_ptr() of a contiguous CUDA tensor), fleetjit DeviceBuffers and objects
 * with a C-contiguous, writable __cuda_array_interface__ whose every entry
 * it checks (fill_cai). For anything else, or anything it would have to
 * refuse or warn about (a non-contiguous view, a dtype that differs from
 * the kernel's parameter, a NULL address, a float past float32), it
 * returns NotImplemented and the binding takes its pure-ctypes path, which
 * explains the refusal. The binding works without this module
 * (fleetjit/runtime.py falls back).
 *
 * Built against the stable ABI (abi3, Python >= 3.8), so one build serves
 * every CPython 3.x. It does not link libfleetjit: the binding hands it the
 * address of the fj_launch it loaded.
 *
 *   gcc -O2 -shared -fPIC -I include -I /usr/include/python3.X \
 *       bindings/python/fleetjit/_fastlaunch.c \
 *       -o bindings/python/fleetjit/_fastlaunch.abi3.so
 * (scripts/dev/build-python-ext does this.)
 */
#define Py_LIMITED_API 0x03080000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fleetjit/fleetjit.h"

#define FAST_MAX_ARGS 64

typedef fj_status* (*launch_fn)(fj_kernel*, const fj_launch_config*,
                                const fj_arg*, size_t);

/* Registered once by the binding (register_types). */
static PyObject* g_torch_tensor = NULL; /* torch.Tensor, or NULL */
/* torch.Tensor.is_contiguous and .data_ptr as the class holds them (its C
 * method descriptors), called with the tensor as the first argument for an
 * exact torch.Tensor: no attribute lookup per launch. Subclasses, which
 * may override either, look them up. */
static PyObject *g_tensor_is_contiguous = NULL, *g_tensor_data_ptr = NULL;
static PyObject* g_scalar_type = NULL; /* fleetjit.args.Scalar */
static PyObject* g_kind_codes = NULL;  /* {"i32": FJ_ARG_I32, ...} */
static PyObject* g_type_codes = NULL;  /* {numpy.float32: FJ_ARG_F32, ...} */
static PyObject* g_typestrs = NULL; /* tensors.CAI_TYPESTRS: {"<f4": (2, 32)} */
/* Interned attribute names. */
static PyObject *s_is_cuda, *s_is_contiguous, *s_data_ptr, *s_dtype,
    *s_device_address, *s_kind, *s_value, *s_cai, *s_cuda_stream, *s_ptr,
    *s_data, *s_shape, *s_strides, *s_typestr, *s_mask;

/* ----------------------------------------------------------------- Gate
 *
 * In-flight calls (fleetjit/_fast.py's PyGate is the same for the binding
 * without this module). A Runtime has one; each Module, Stream and
 * BuildFuture has a child of it, Gate(parent, handle), whose calls also
 * count in the parent's. enter() is False once this gate or its parent is
 * closed, else counts a call that exit() ends; close(on_idle) refuses new
 * calls and runs on_idle (the destroy) now when none is in flight, its
 * error raised, else when the last one exits. So a module, stream or build
 * is destroyed only once no call that uses it runs, and a runtime once no
 * call at all runs. Every change runs with the GIL held, so the counts
 * need no lock; a Launcher enters a gate in C around fj_launch, which runs
 * without the GIL. `handle` is the child's C handle (the fj_stream* a
 * launch reads without a Python call). */
typedef struct Gate {
  PyObject_HEAD Py_ssize_t inflight;
  int closed;
  PyObject* on_idle;   /* the pending destroy, or NULL */
  struct Gate* parent; /* the runtime's gate, or NULL (a runtime's own) */
  unsigned long long handle;
} Gate;

static PyObject* g_gate_type = NULL;

/* 1 when a call may enter (neither the gate nor its parent is closed). */
static int gate_open(const Gate* g) {
  return !g->closed && (g->parent == NULL || !g->parent->closed);
}

static void gate_count(Gate* g) {
  ++g->inflight;
  if (g->parent != NULL) ++g->parent->inflight;
}

/* Ends one in-flight count of `g` alone; runs the pending destroy after
 * the last one (an error in it goes to sys.unraisablehook: the call itself
 * worked). */
static void gate_exit_one(Gate* g) {
  if (--g->inflight != 0 || g->on_idle == NULL) return;
  PyObject* on_idle = g->on_idle;
  g->on_idle = NULL;
  PyObject* r = PyObject_CallObject(on_idle, NULL);
  if (r == NULL) PyErr_WriteUnraisable(on_idle);
  Py_XDECREF(r);
  Py_DECREF(on_idle);
}

/* Ends a call that gate_count counted: the child's count first, so that
 * its destroy runs while the parent still counts the call (the runtime is
 * not destroyed under it). */
static void gate_exit_call(Gate* g) {
  Gate* parent = g->parent;
  gate_exit_one(g);
  if (parent != NULL) gate_exit_one(parent);
}

static PyObject* gate_enter(PyObject* op, PyObject* unused) {
  (void)unused;
  Gate* g = (Gate*)op;
  if (!gate_open(g)) Py_RETURN_FALSE;
  gate_count(g);
  Py_RETURN_TRUE;
}

static PyObject* gate_exit(PyObject* op, PyObject* unused) {
  (void)unused;
  Gate* g = (Gate*)op;
  if (g->inflight <= 0 || (g->parent != NULL && g->parent->inflight <= 0)) {
    PyErr_SetString(PyExc_RuntimeError, "Gate.exit() without enter()");
    return NULL;
  }
  gate_exit_call(g);
  Py_RETURN_NONE;
}

static PyObject* gate_close(PyObject* op, PyObject* on_idle) {
  Gate* g = (Gate*)op;
  if (g->closed) Py_RETURN_NONE;
  g->closed = 1;
  if (g->inflight > 0) {
    Py_INCREF(on_idle);
    g->on_idle = on_idle;
    Py_RETURN_NONE;
  }
  return PyObject_CallObject(on_idle, NULL);
}

/* Gate(parent=None, handle=0) */
static int gate_init(PyObject* op, PyObject* args, PyObject* kwargs) {
  Gate* g = (Gate*)op;
  PyObject* parent = Py_None;
  unsigned long long handle = 0;
  static char* kw[] = {"parent", "handle", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OK", kw, &parent, &handle))
    return -1;
  if (parent != Py_None && Py_TYPE(parent) != (PyTypeObject*)g_gate_type) {
    PyErr_SetString(PyExc_TypeError, "parent is a Gate or None");
    return -1;
  }
  if (parent != Py_None && ((Gate*)parent)->parent != NULL) {
    PyErr_SetString(PyExc_ValueError, "parent is a runtime's Gate");
    return -1;
  }
  Gate* old = g->parent;
  g->parent = parent == Py_None ? NULL : (Gate*)parent;
  Py_XINCREF(g->parent);
  Py_XDECREF(old);
  g->handle = handle;
  return 0;
}

static PyObject* gate_get_parent(PyObject* op, void* unused) {
  (void)unused;
  Gate* p = ((Gate*)op)->parent;
  if (p == NULL) Py_RETURN_NONE;
  Py_INCREF(p);
  return (PyObject*)p;
}

static PyObject* gate_get_handle(PyObject* op, void* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(((Gate*)op)->handle);
}

static PyObject* gate_get_closed(PyObject* op, void* unused) {
  (void)unused;
  return PyBool_FromLong(((Gate*)op)->closed);
}

static PyObject* gate_get_inflight(PyObject* op, void* unused) {
  (void)unused;
  return PyLong_FromSsize_t(((Gate*)op)->inflight);
}

static void gate_dealloc(PyObject* op) {
  PyTypeObject* type = Py_TYPE(op);
  Py_CLEAR(((Gate*)op)->on_idle);
  Py_CLEAR(((Gate*)op)->parent);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(op);
  Py_DECREF(type);
}

static PyMethodDef gate_methods[] = {
    {"enter", gate_enter, METH_NOARGS,
     "False once closed, else counts a call in flight."},
    {"exit", gate_exit, METH_NOARGS, "Ends a call that enter() counted."},
    {"close", gate_close, METH_O,
     "close(on_idle): refuses new calls; on_idle() runs once none is in "
     "flight."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef gate_getset[] = {
    {"closed", gate_get_closed, NULL, "close() was called", NULL},
    {"inflight", gate_get_inflight, NULL, "calls in flight", NULL},
    {"parent", gate_get_parent, NULL, "the runtime's Gate, or None", NULL},
    {"handle", gate_get_handle, NULL, "the C handle it guards (0: none)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot gate_slots[] = {
    {Py_tp_dealloc, (void*)gate_dealloc},
    {Py_tp_methods, gate_methods},
    {Py_tp_getset, gate_getset},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_init, (void*)gate_init},
    {Py_tp_doc,
     (void*)"Gate(parent=None, handle=0): a Runtime's in-flight calls, or "
            "those of one of its modules, streams or builds."},
    {0, NULL}};

static PyType_Spec gate_spec = {"fleetjit._fastlaunch.Gate", sizeof(Gate), 0,
                                Py_TPFLAGS_DEFAULT, gate_slots};

/* Fills dims[3] from an int or a tuple of 1 to 3 ints (not None, a bool or
 * (), which the ctypes path refuses); 0 on success. */
static int read_dims(PyObject* v, uint32_t dims[3], uint32_t fill) {
  dims[0] = dims[1] = dims[2] = fill;
  if (PyBool_Check(v)) return -1;
  if (PyLong_Check(v)) {
    unsigned long x = PyLong_AsUnsignedLong(v);
    if (PyErr_Occurred() || x > 0xFFFFFFFFul) return -1;
    dims[0] = (uint32_t)x;
    return 0;
  }
  if (!PyTuple_Check(v)) return -1;
  Py_ssize_t n = PyTuple_Size(v);
  if (n < 1 || n > 3) return -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GetItem(v, i);
    if (!PyLong_Check(item) || PyBool_Check(item)) return -1;
    unsigned long x = PyLong_AsUnsignedLong(item);
    if (PyErr_Occurred() || x > 0xFFFFFFFFul) return -1;
    dims[i] = (uint32_t)x;
  }
  return 0;
}

/* An attribute that must be a Python int, as uint64; 0 on success. */
static int attr_u64(PyObject* obj, PyObject* name, uint64_t* out) {
  PyObject* v = PyObject_GetAttr(obj, name);
  if (v == NULL) return -1;
  int ok = PyLong_Check(v);
  if (ok) *out = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  return ok && !PyErr_Occurred() ? 0 : -1;
}

/* 1: `a` filled; 0: not handled here (take the ctypes path); -1: error. */
static int fill_torch(PyObject* t, PyObject* want_dtype, int exact, fj_arg* a) {
  PyObject* v = PyObject_GetAttr(t, s_is_cuda);
  if (v == NULL) return -1;
  int cuda = v == Py_True;
  Py_DECREF(v);
  if (!cuda) return 0; /* CPU or pinned: the ctypes path decides */
  v = exact ? PyObject_CallFunctionObjArgs(g_tensor_is_contiguous, t, NULL)
            : PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
  if (v == NULL) return -1;
  int contiguous = v == Py_True;
  Py_DECREF(v);
  if (!contiguous) return 0; /* refused, with its message, by that path */
  if (want_dtype != NULL && want_dtype != Py_None) {
    v = PyObject_GetAttr(t, s_dtype);
    if (v == NULL) return -1;
    int same = v == want_dtype;
    Py_DECREF(v);
    if (!same) return 0; /* the ctypes path warns */
  }
  v = exact ? PyObject_CallFunctionObjArgs(g_tensor_data_ptr, t, NULL)
            : PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
  if (v == NULL) return -1;
  uint64_t p = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  if (PyErr_Occurred()) return -1;
  a->kind = FJ_ARG_POINTER;
  a->v.pointer = p;
  return 1;
}

/* ------------------------------------------------------------ torch shim
 *
 * An exact torch.Tensor read through libtorch's stable C shim (the
 * aoti_torch_* functions AOTInductor's models call: device type, dtype,
 * contiguity, data pointer), given the address of the at::Tensor inside the
 * Python object: four C calls in place of fill_torch's four Python calls
 * (is_cuda, is_contiguous(), dtype, data_ptr()). That address is no API:
 * fleetjit/_fast.py finds it at registration by comparing the words after
 * the object header with Tensor._cdata (the TensorImpl address torch
 * reports), checks every read against torch's own methods on probe
 * tensors, and leaves the shim off on any difference (fill_torch then
 * serves every tensor). Whatever the shim does not settle (an error code, a
 * borrowed tensor, a CPU tensor, another dtype, a non-contiguous view) goes
 * to fill_torch, which decides as before. */
typedef int32_t (*shim_ptr_fn)(void*, void**);
typedef int32_t (*shim_i32_fn)(void*, int32_t*);
typedef int32_t (*shim_bool_fn)(void*, unsigned char*); /* C++ bool: 1 byte */
typedef int32_t (*shim_i64_fn)(void*, int64_t*);
typedef int32_t (*shim_i64p_fn)(void*, int64_t**);
#define SHIM_DTYPES 64
static struct {
  Py_ssize_t offset; /* of the at::Tensor in the object; 0: shim off */
  int live; /* launches use it (else only torch_shim_read, for the checks) */
  Py_ssize_t borrow_flag; /* of c10::MaybeOwned's isBorrowed_, or -1 */
  int32_t cuda;           /* aoti_torch_device_type_cuda() */
  shim_ptr_fn data_ptr;
  shim_i32_fn device_type, dtype;
  shim_bool_fn is_contiguous; /* NULL before torch 2.9: from the strides */
  shim_i64_fn dim;
  shim_i64p_fn sizes, strides;
  /* The torch.dtype of each ScalarType code (held by g_shim_dtypes). */
  PyObject* dtype_of[SHIM_DTYPES];
} g_shim;
static PyObject* g_shim_dtypes = NULL;

/* 1: contiguous (row-major, torch's default memory format), 0: not, -1:
 * the shim failed. A tensor of no elements is contiguous, as for torch. */
static int shim_contiguous(void* h) {
  if (g_shim.is_contiguous != NULL) {
    unsigned char c = 0;
    if (g_shim.is_contiguous(h, &c) != 0) return -1;
    return c != 0;
  }
  int64_t dim = 0, *sizes = NULL, *strides = NULL;
  if (g_shim.dim(h, &dim) != 0 || g_shim.sizes(h, &sizes) != 0 ||
      g_shim.strides(h, &strides) != 0 || dim < 0 ||
      (dim > 0 && (sizes == NULL || strides == NULL)))
    return -1;
  for (int64_t d = 0; d < dim; ++d)
    if (sizes[d] == 0) return 1;
  int64_t expected = 1;
  for (int64_t d = dim - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return 0;
    expected *= sizes[d];
  }
  return 1;
}

/* The at::Tensor of an exact torch.Tensor, or NULL (shim off, borrowed). */
static void* shim_handle(PyObject* t) {
  if (g_shim.offset == 0) return NULL;
  char* base = (char*)t;
  if (g_shim.borrow_flag >= 0 && base[g_shim.borrow_flag] != 0) return NULL;
  return base + g_shim.offset;
}

/* 1: `a` filled; otherwise fill_torch decides. */
static int fill_torch_shim(PyObject* t, PyObject* want_dtype, fj_arg* a) {
  void* h = shim_handle(t);
  int32_t v = -1;
  void* p = NULL;
  if (h == NULL || g_shim.device_type(h, &v) != 0 || v != g_shim.cuda)
    return fill_torch(t, want_dtype, g_tensor_data_ptr != NULL, a);
  if (want_dtype != NULL && want_dtype != Py_None &&
      (g_shim.dtype(h, &v) != 0 || v < 0 || v >= SHIM_DTYPES ||
       g_shim.dtype_of[v] != want_dtype))
    return fill_torch(t, want_dtype, g_tensor_data_ptr != NULL, a);
  if (shim_contiguous(h) != 1 || g_shim.data_ptr(h, &p) != 0)
    return fill_torch(t, want_dtype, g_tensor_data_ptr != NULL, a);
  a->kind = FJ_ARG_POINTER;
  a->v.pointer = (uint64_t)(uintptr_t)p;
  return 1;
}

/* torch_shim_words(tensor) -> (header bytes, the byte after the header, the
 * word after it, the word after that): what _fast.py compares with
 * Tensor._cdata. Only for an exact torch.Tensor whose basic size covers
 * them. */
static PyObject* torch_shim_words(PyObject* self, PyObject* t) {
  (void)self;
  if (g_torch_tensor == NULL || (PyObject*)Py_TYPE(t) != g_torch_tensor) {
    PyErr_SetString(PyExc_TypeError, "an exact torch.Tensor, once registered");
    return NULL;
  }
  PyObject* size = PyObject_GetAttrString(g_torch_tensor, "__basicsize__");
  if (size == NULL) return NULL;
  Py_ssize_t basic = PyLong_AsSsize_t(size);
  Py_DECREF(size);
  if (basic == -1 && PyErr_Occurred()) return NULL;
  if (basic < (Py_ssize_t)(sizeof(PyObject) + 2 * sizeof(void*))) {
    PyErr_SetString(PyExc_ValueError,
                    "torch.Tensor objects are smaller than the shim reads");
    return NULL;
  }
  const char* base = (const char*)t + sizeof(PyObject);
  void *w0, *w1;
  memcpy(&w0, base, sizeof w0);
  memcpy(&w1, base + sizeof w0, sizeof w1);
  return Py_BuildValue(
      "(niKK)", (Py_ssize_t)sizeof(PyObject), (int)(unsigned char)base[0],
      (unsigned long long)(uintptr_t)w0, (unsigned long long)(uintptr_t)w1);
}

/* torch_shim(offset, borrow_flag, cuda, functions, dtypes, live): sets the
 * shim up (offset 0: off). functions: the addresses of
 * aoti_torch_get_data_ptr, _get_device_type, _get_dtype, _is_contiguous (0:
 * absent), _get_dim, _get_sizes and _get_strides; dtypes: {ScalarType code:
 * torch.dtype}; live: launches use it (else torch_shim_read alone, while
 * the binding checks it). */
static PyObject* torch_shim(PyObject* self, PyObject* argv) {
  (void)self;
  Py_ssize_t offset, borrow_flag;
  int cuda;
  unsigned long long f[7];
  PyObject* dtypes;
  int live;
  if (!PyArg_ParseTuple(argv, "nni(KKKKKKK)Op", &offset, &borrow_flag, &cuda,
                        &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
                        &dtypes, &live))
    return NULL;
  if (!PyDict_Check(dtypes)) {
    PyErr_SetString(PyExc_TypeError, "dtypes is a dict");
    return NULL;
  }
  if (offset != 0 && (offset < (Py_ssize_t)sizeof(PyObject) ||
                      borrow_flag >= offset || f[0] == 0 || f[1] == 0 ||
                      f[2] == 0 || f[4] == 0 || f[5] == 0 || f[6] == 0)) {
    PyErr_SetString(PyExc_ValueError,
                    "torch_shim: an offset or a function is missing");
    return NULL;
  }
  memset(&g_shim, 0, sizeof g_shim);
  Py_XDECREF(g_shim_dtypes);
  g_shim_dtypes = NULL;
  if (offset == 0) Py_RETURN_NONE;
  /* A copy: dtype_of borrows its values, whatever the caller does after. */
  PyObject* table = PyDict_Copy(dtypes);
  if (table == NULL) return NULL;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(table, &pos, &key, &value)) {
    long code = PyLong_AsLong(key);
    if (code == -1 && PyErr_Occurred()) {
      memset(&g_shim, 0, sizeof g_shim);
      Py_DECREF(table);
      return NULL;
    }
    if (code >= 0 && code < SHIM_DTYPES) g_shim.dtype_of[code] = value;
  }
  g_shim_dtypes = table;
  g_shim.borrow_flag = borrow_flag;
  g_shim.cuda = cuda;
  g_shim.data_ptr = (shim_ptr_fn)(uintptr_t)f[0];
  g_shim.device_type = (shim_i32_fn)(uintptr_t)f[1];
  g_shim.dtype = (shim_i32_fn)(uintptr_t)f[2];
  g_shim.is_contiguous = (shim_bool_fn)(uintptr_t)f[3];
  g_shim.dim = (shim_i64_fn)(uintptr_t)f[4];
  g_shim.sizes = (shim_i64p_fn)(uintptr_t)f[5];
  g_shim.strides = (shim_i64p_fn)(uintptr_t)f[6];
  g_shim.offset = offset;
  g_shim.live = live;
  Py_RETURN_NONE;
}

/* torch_shim_read(tensor) -> (data_ptr, device type, dtype code,
 * contiguous) as the shim reads them, or None where it would leave the
 * tensor to fill_torch before reading (shim off, borrowed, an error code).
 * For the binding's check at registration, and the tests. */
static PyObject* torch_shim_read(PyObject* self, PyObject* t) {
  (void)self;
  if (g_torch_tensor == NULL || (PyObject*)Py_TYPE(t) != g_torch_tensor) {
    PyErr_SetString(PyExc_TypeError, "an exact torch.Tensor, once registered");
    return NULL;
  }
  void* h = shim_handle(t);
  int32_t device = -1, dtype = -1;
  void* p = NULL;
  int contiguous;
  if (h == NULL || g_shim.device_type(h, &device) != 0 ||
      g_shim.dtype(h, &dtype) != 0 || (contiguous = shim_contiguous(h)) < 0 ||
      g_shim.data_ptr(h, &p) != 0)
    Py_RETURN_NONE;
  return Py_BuildValue("(KiiO)", (unsigned long long)(uintptr_t)p, device,
                       dtype, contiguous ? Py_True : Py_False);
}

static int fill_scalar(PyObject* s, fj_arg* a) {
  PyObject* kind = PyObject_GetAttr(s, s_kind);
  if (kind == NULL) return -1;
  PyObject* code = PyDict_GetItem(g_kind_codes, kind); /* borrowed */
  Py_DECREF(kind);
  if (code == NULL) return 0;
  long k = PyLong_AsLong(code);
  PyObject* value = PyObject_GetAttr(s, s_value);
  if (value == NULL) return -1;
  int rc = 1;
  a->kind = (fj_arg_kind)k;
  switch (k) {
    case FJ_ARG_F32:
      a->v.f32 = (float)PyFloat_AsDouble(value);
      break;
    case FJ_ARG_F64:
      a->v.f64 = PyFloat_AsDouble(value);
      break;
    case FJ_ARG_I8:
    case FJ_ARG_I16:
    case FJ_ARG_I32:
    case FJ_ARG_I64: {
      long long x = PyLong_AsLongLong(value);
      if (k == FJ_ARG_I8) a->v.i8 = (int8_t)x;
      if (k == FJ_ARG_I16) a->v.i16 = (int16_t)x;
      if (k == FJ_ARG_I32) a->v.i32 = (int32_t)x;
      if (k == FJ_ARG_I64) a->v.i64 = (int64_t)x;
      break;
    }
    case FJ_ARG_U8:
    case FJ_ARG_U16:
    case FJ_ARG_F16:
    case FJ_ARG_BF16:
    case FJ_ARG_U32:
    case FJ_ARG_U64:
    case FJ_ARG_POINTER: {
      unsigned long long x = PyLong_AsUnsignedLongLong(value);
      if (k == FJ_ARG_U8) a->v.u8 = (uint8_t)x;
      if (k == FJ_ARG_U16 || k == FJ_ARG_F16 || k == FJ_ARG_BF16)
        a->v.u16 = (uint16_t)x;
      if (k == FJ_ARG_U32) a->v.u32 = (uint32_t)x;
      if (k == FJ_ARG_U64 || k == FJ_ARG_POINTER) a->v.u64 = (uint64_t)x;
      break;
    }
    default:
      rc = 0;
  }
  Py_DECREF(value);
  if (rc == 1 && PyErr_Occurred()) rc = -1;
  return rc;
}

/* The entry `key` of a __cuda_array_interface__ dict (borrowed), NULL
 * when absent (no exception set). */
static PyObject* cai_get(PyObject* cai, PyObject* key) {
  PyObject* v = PyDict_GetItemWithError(cai, key);
  if (v == NULL) PyErr_Clear();
  return v;
}

/* 1 if `shape` is a tuple or list of non-negative ints, else 0. */
static int cai_shape_ok(PyObject* shape) {
  if (shape == NULL || !(PyTuple_Check(shape) || PyList_Check(shape))) return 0;
  Py_ssize_t n = PySequence_Size(shape);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PySequence_GetItem(shape, i);
    if (x == NULL) {
      PyErr_Clear();
      return 0;
    }
    int ok = PyLong_CheckExact(x) && PyLong_AsLongLong(x) >= 0;
    Py_DECREF(x);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    if (!ok) return 0;
  }
  return 1;
}

/* A __cuda_array_interface__ this path packs without the ctypes path's
 * refusals or warning: a dict with no mask and no strides, data =
 * (address, False) with a non-NULL uint64 address, a shape of
 * non-negative ints and a typestr of tensors.CAI_TYPESTRS whose (code,
 * bits) is `want` (the kernel's pointee, or None when unknown). Anything
 * else is the ctypes path's to check (0). */
static int fill_cai(PyObject* obj, PyObject* want, fj_arg* a) {
  PyObject* cai = PyObject_GetAttr(obj, s_cai);
  if (cai == NULL) {
    PyErr_Clear();
    return 0;
  }
  int rc = 0;
  if (!PyDict_Check(cai) || g_typestrs == NULL) goto done;
  PyObject* v = cai_get(cai, s_strides);
  if (v != NULL && v != Py_None) goto done;
  v = cai_get(cai, s_mask);
  if (v != NULL && v != Py_None) goto done;
  if (!cai_shape_ok(cai_get(cai, s_shape))) goto done;
  PyObject* typestr = cai_get(cai, s_typestr);
  if (typestr == NULL || !PyUnicode_CheckExact(typestr)) goto done;
  PyObject* dtype = PyDict_GetItemWithError(g_typestrs, typestr);
  if (dtype == NULL) goto done;
  if (want != NULL && want != Py_None && dtype != want) {
    int same = PyObject_RichCompareBool(dtype, want, Py_EQ);
    if (same != 1) goto done; /* the ctypes path warns */
  }
  PyObject* data = cai_get(cai, s_data);
  if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) != 2 ||
      PyTuple_GetItem(data, 1) != Py_False)
    goto done; /* read-only: the ctypes path checks the parameter */
  PyObject* ptr = PyTuple_GetItem(data, 0);
  if (!PyLong_CheckExact(ptr)) goto done;
  unsigned long long p = PyLong_AsUnsignedLongLong(ptr);
  if (PyErr_Occurred() || p == 0) goto done; /* NULL or past uint64 */
  a->kind = FJ_ARG_POINTER;
  a->v.pointer = p;
  rc = 1;
done:
  PyErr_Clear();
  Py_DECREF(cai);
  return rc;
}

/* A scalar of a registered type (NumPy's float32, int64...): its kind,
 * its value through __float__ / __index__. */
static int fill_typed_scalar(PyObject* v, long k, fj_arg* a) {
  a->kind = (fj_arg_kind)k;
  if (k == FJ_ARG_F32 || k == FJ_ARG_F64) {
    double x = PyFloat_AsDouble(v);
    if (k == FJ_ARG_F32) a->v.f32 = (float)x;
    if (k == FJ_ARG_F64) a->v.f64 = x;
    return PyErr_Occurred() ? -1 : 1;
  }
  /* Integers: as a Python int first (PyLong_AsUnsignedLongLong takes
   * nothing else). */
  PyObject* i = PyNumber_Index(v);
  if (i == NULL) return -1;
  switch (k) {
    case FJ_ARG_I8:
    case FJ_ARG_I16:
    case FJ_ARG_I32:
    case FJ_ARG_I64: {
      long long x = PyLong_AsLongLong(i);
      if (k == FJ_ARG_I8) a->v.i8 = (int8_t)x;
      if (k == FJ_ARG_I16) a->v.i16 = (int16_t)x;
      if (k == FJ_ARG_I32) a->v.i32 = (int32_t)x;
      if (k == FJ_ARG_I64) a->v.i64 = (int64_t)x;
      break;
    }
    case FJ_ARG_U8:
    case FJ_ARG_U16:
    case FJ_ARG_U32:
    case FJ_ARG_U64: {
      unsigned long long x = PyLong_AsUnsignedLongLong(i);
      if (k == FJ_ARG_U8) a->v.u8 = (uint8_t)x;
      if (k == FJ_ARG_U16) a->v.u16 = (uint16_t)x;
      if (k == FJ_ARG_U32) a->v.u32 = (uint32_t)x;
      if (k == FJ_ARG_U64) a->v.u64 = (uint64_t)x;
      break;
    }
    default:
      Py_DECREF(i);
      return 0;
  }
  Py_DECREF(i);
  return PyErr_Occurred() ? -1 : 1;
}

/* want_dtype: the torch dtype a torch tensor should have; want_cai: the
 * (code, bits) of a __cuda_array_interface__ (each NULL or None: unknown). */
static int fill_one(PyObject* v, PyObject* want_dtype, PyObject* want_cai,
                    fj_arg* a) {
  if (PyLong_CheckExact(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < INT32_MIN || x > INT32_MAX) return 0;
    a->kind = FJ_ARG_I32;
    a->v.i32 = (int32_t)x;
    return 1;
  }
  if (PyFloat_CheckExact(v)) {
    double x = PyFloat_AsDouble(v);
    if (fabs(x) > FLT_MAX && !isinf(x))
      return 0; /* past float32: refused
                  there (NaN compares false) */
    a->kind = FJ_ARG_F32;
    a->v.f32 = (float)x;
    return 1;
  }
  PyObject* type = (PyObject*)Py_TYPE(v);
  if (type == g_torch_tensor)
    return g_shim.live
               ? fill_torch_shim(v, want_dtype, a)
               : fill_torch(v, want_dtype, g_tensor_data_ptr != NULL, a);
  if (type == g_scalar_type) return fill_scalar(v, a);
  if (g_type_codes != NULL) {
    PyObject* code = PyDict_GetItem(g_type_codes, type); /* borrowed */
    if (code != NULL) return fill_typed_scalar(v, PyLong_AsLong(code), a);
  }
  /* A subclass (nn.Parameter...) by a test on the type, not isinstance():
   * torch.Tensor's metaclass makes isinstance() call __instancecheck__, a
   * method call for every argument that is not a tensor. The two differ
   * only for a type that claims instances it does not have, which the
   * ctypes path takes. */
  if (g_torch_tensor != NULL &&
      PyType_IsSubtype(Py_TYPE(v), (PyTypeObject*)g_torch_tensor))
    return fill_torch(v, want_dtype, 0, a);
  if (PyObject_HasAttr(v, s_device_address)) {
    uint64_t p;
    if (attr_u64(v, s_device_address, &p) != 0 || p == 0) {
      PyErr_Clear(); /* a closed buffer: refused there */
      return 0;
    }
    a->kind = FJ_ARG_POINTER;
    a->v.pointer = p;
    return 1;
  }
  return fill_cai(v, want_cai, a);
}

static PyObject* not_handled(void) {
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

/* grid, block and shared_bytes into cfg; 0, or -1 (no exception set) for
 * a value the ctypes path refuses by name. shared_bytes is read as
 * read_dims reads a dimension: an int that fits uint32. */
static int read_config(PyObject* grid, PyObject* block, PyObject* shared,
                       fj_launch_config* cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->struct_size = sizeof(*cfg);
  uint32_t shared_bytes[3];
  if (read_dims(grid, cfg->grid, 1) != 0 || read_dims(block, cfg->block, 1) ||
      !PyLong_Check(shared) || read_dims(shared, shared_bytes, 0) != 0) {
    PyErr_Clear();
    return -1;
  }
  cfg->shared_bytes = shared_bytes[0];
  return 0;
}

/* The fj_stream* of a framework stream (.cuda_stream or .ptr) or an
 * integer CUstream, looked up in `streams` ({CUstream: fj_stream*}).
 * 1: *out set, and *gate (borrowed) when the entry is a wrapped Stream's
 * Gate, which the launch must enter; 0: not a stream this path reads (the
 * ctypes path refuses it); 2: no fj_stream yet, *wrap is the CUstream (a
 * new reference). */
static int read_stream(PyObject* stream_obj, PyObject* streams, fj_stream** out,
                       PyObject** wrap, Gate** gate) {
  PyObject* cu = NULL;
  if (PyLong_Check(stream_obj)) {
    cu = stream_obj;
    Py_INCREF(cu);
  } else {
    cu = PyObject_GetAttr(stream_obj, s_cuda_stream);
    if (cu == NULL) {
      PyErr_Clear();
      cu = PyObject_GetAttr(stream_obj, s_ptr);
    }
    if (cu == NULL || !PyLong_Check(cu)) {
      PyErr_Clear();
      Py_XDECREF(cu);
      return 0;
    }
  }
  unsigned long long cu_value = PyLong_AsUnsignedLongLong(cu);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    Py_DECREF(cu);
    return 0;
  }
  *out = NULL;
  if (cu_value != 0) { /* 0: the legacy default stream */
    PyObject* fjs = PyDict_Check(streams) ? PyDict_GetItem(streams, cu) : NULL;
    if (fjs == NULL) {
      *wrap = cu;
      return 2;
    }
    if (Py_TYPE(fjs) == (PyTypeObject*)g_gate_type) { /* a wrapped Stream's */
      Py_DECREF(cu);
      if (!gate_open((Gate*)fjs)) return 0; /* closed: that path decides */
      *out = (fj_stream*)(uintptr_t)((Gate*)fjs)->handle;
      *gate = (Gate*)fjs; /* borrowed */
      return 1;
    }
    unsigned long long p = PyLong_AsUnsignedLongLong(fjs);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      Py_DECREF(cu);
      return 0;
    }
    *out = (fj_stream*)(uintptr_t)p;
  }
  Py_DECREF(cu);
  return 1;
}

/* A float of any kind: refused for a parameter declared as an integer. */
static int is_float_kind(fj_arg_kind k) {
  return k == FJ_ARG_F16 || k == FJ_ARG_BF16 || k == FJ_ARG_F32 ||
         k == FJ_ARG_F64 || k == FJ_ARG_C64 || k == FJ_ARG_C128;
}

/* Packs `args` (a list or a tuple, read with borrowed references) into
 * packed[FAST_MAX_ARGS]. 1: *n set; 0: left to the ctypes path (anything
 * else, a generator..., or an argument fill_one does not take). A
 * cai_dtypes entry that is a str ("int") marks a parameter the kernel
 * declares as an integer: a float packed for it goes to the ctypes path,
 * which refuses it by name (its bits would arrive as the integer). */
static int pack_args(PyObject* args, PyObject* dtypes, PyObject* cai_dtypes,
                     fj_arg* packed, Py_ssize_t* n) {
  int is_list = PyList_Check(args);
  if (!is_list && !PyTuple_Check(args)) return 0;
  Py_ssize_t count = is_list ? PyList_Size(args) : PyTuple_Size(args);
  if (count > FAST_MAX_ARGS) return 0;
  Py_ssize_t num_dtypes =
      (dtypes != NULL && PyTuple_Check(dtypes)) ? PyTuple_Size(dtypes) : 0;
  Py_ssize_t num_cai = (cai_dtypes != NULL && PyTuple_Check(cai_dtypes))
                           ? PyTuple_Size(cai_dtypes)
                           : 0;
  for (Py_ssize_t i = 0; i < count; ++i) {
    fj_arg* a = &packed[i];
    memset(a, 0, sizeof(*a));
    a->struct_size = sizeof(fj_arg);
    PyObject* want = i < num_dtypes ? PyTuple_GetItem(dtypes, i) : NULL;
    PyObject* want_cai = i < num_cai ? PyTuple_GetItem(cai_dtypes, i) : NULL;
    /* fill_one may run Python code (properties) that shrinks a list. */
    PyObject* item =
        is_list ? PyList_GetItem(args, i) : PyTuple_GetItem(args, i);
    if (item == NULL) {
      PyErr_Clear();
      return 0;
    }
    Py_INCREF(item);
    int rc = fill_one(item, want, want_cai, a);
    Py_DECREF(item);
    if (rc <= 0) {
      if (rc < 0) PyErr_Clear();
      return 0;
    }
    if (want_cai != NULL && PyUnicode_CheckExact(want_cai) &&
        is_float_kind(a->kind))
      return 0;
  }
  *n = count;
  return 1;
}

/* Calls fj_launch without the GIL (cuLaunchKernel can block on a full
 * queue); the fj_status* of a failed launch, else NULL. */
static fj_status* call_launch(unsigned long long fn, unsigned long long kernel,
                              const fj_launch_config* cfg, const fj_arg* packed,
                              Py_ssize_t n) {
  launch_fn launch = (launch_fn)(uintptr_t)fn;
  fj_status* status;
  Py_BEGIN_ALLOW_THREADS;
  status =
      launch((fj_kernel*)(uintptr_t)kernel, cfg, n ? packed : NULL, (size_t)n);
  Py_END_ALLOW_THREADS;
  return status;
}

/* launch(fn, kernel, grid, block, shared, fj_stream, stream_obj, streams,
 *        args, dtypes[, cai_dtypes])
 *   fn:         address of fj_launch
 *   kernel:     fj_kernel* as an int
 *   grid/block: int or tuple of <= 3 ints
 *   fj_stream:  fj_stream* as an int (0 = legacy default), used when
 *               stream_obj is None
 *   stream_obj: a framework stream (.cuda_stream or .ptr) or an integer
 *               CUstream, looked up in `streams` ({CUstream: fj_stream*},
 *               or runtime._gates_by_cu: {CUstream: the wrapped Stream's
 *               Gate}, entered around the launch)
 *   args:       a list or a tuple (anything else: NotImplemented)
 *   dtypes:     None or a tuple, per parameter: the dtype object a tensor
 *               argument should have, or None
 *   cai_dtypes: None or a tuple, per parameter: the (code, bits) of a
 *               __cuda_array_interface__ argument, or None (Kernel._cai_dtypes)
 * Returns None (launched), an int (the fj_status* of a failed launch: the
 * binding raises it), ("wrap", CUstream) when the stream has no fj_stream
 * yet, or NotImplemented (take the ctypes path). */
static PyObject* fast_launch(PyObject* self, PyObject* argv) {
  (void)self;
  unsigned long long fn_addr, kernel;
  unsigned long long fj_stream_addr;
  PyObject *grid, *block, *shared, *stream_obj, *streams, *args, *dtypes;
  PyObject* cai_dtypes = NULL;
  if (!PyArg_ParseTuple(argv, "KKOOOKOOOO|O", &fn_addr, &kernel, &grid, &block,
                        &shared, &fj_stream_addr, &stream_obj, &streams, &args,
                        &dtypes, &cai_dtypes))
    return NULL;
  fj_launch_config cfg;
  Gate* sgate = NULL; /* a wrapped Stream's, entered around the launch */
  if (read_config(grid, block, shared, &cfg) != 0) return not_handled();
  if (stream_obj == Py_None) {
    cfg.stream = (fj_stream*)(uintptr_t)fj_stream_addr;
  } else {
    PyObject* cu = NULL;
    int rc = read_stream(stream_obj, streams, &cfg.stream, &cu, &sgate);
    if (rc == 0) return not_handled();
    if (rc == 2) {
      PyObject* r = Py_BuildValue("(sO)", "wrap", cu);
      Py_DECREF(cu);
      return r;
    }
    Py_XINCREF(sgate);
  }
  fj_arg packed[FAST_MAX_ARGS];
  Py_ssize_t n = 0;
  /* Packing may have run Python code that closed the stream: test again. */
  if (!pack_args(args, dtypes, cai_dtypes, packed, &n) ||
      (sgate != NULL && !gate_open(sgate))) {
    Py_XDECREF(sgate);
    return not_handled();
  }
  if (sgate != NULL) gate_count(sgate);
  fj_status* status = call_launch(fn_addr, kernel, &cfg, packed, n);
  if (sgate != NULL) {
    gate_exit_call(sgate);
    Py_DECREF(sgate);
  }
  if (status != NULL)
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)status);
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------- Launcher
 *
 * A kernel's launch(grid, block, args=(), stream=None, shared_bytes=0,
 * cluster=None) as a C function bound to a Launcher (its state):
 * runtime.Kernel stores one in its instance dict as `launch` (bind()), so
 * kernel.launch(...) reaches fj_launch with no Python frame. It launches
 * what fast_launch would; anything else goes to Python with the call as it
 * came: to Kernel.launch itself for a call it does not parse, a closed
 * module or runtime, a stream to wrap and USE_FAST_PATH off (the same
 * arguments, errors and stream handling as before), to
 * Kernel._launch_ctypes for what fast_launch answers NotImplemented to. It
 * holds the Kernel, which holds it: a cycle the garbage collector breaks
 * (tp_traverse, tp_clear). */
typedef struct {
  PyObject_HEAD unsigned long long fn; /* fj_launch */
  unsigned long long kernel;           /* fj_kernel* */
  PyObject* owner;                     /* the runtime.Kernel */
  PyObject* module;                    /* its Module */
  Gate* gate; /* its Module's in-flight calls (a child of the Runtime's) */
  PyObject* streams;     /* runtime._gates_by_cu, changed in place */
  PyObject* ns;          /* fleetjit.runtime's globals */
  PyObject* stream_type; /* runtime.Stream */
  PyObject* dtypes;      /* the torch dtypes, once torch is imported */
  PyObject* cai_dtypes;  /* Kernel._cai_dtypes() */
} Launcher;

static PyObject* g_launcher_type = NULL;
static PyObject* s_zero = NULL;    /* shared_bytes' default */
static PyObject* s_empty = NULL;   /* args' default */
static int g_numpy_registered = 0; /* register_types saw NumPy's types */
static PyObject *s_grid, *s_block, *s_args, *s_stream, *s_shared_bytes,
    *s_cluster, *s_handle, *s_live, *s_launch, *s_launch_ctypes, *s_fast_dtypes,
    *s_use_fast_path, *s_check, *s_stream_cls, *s_torch, *s_numpy, *s_gate;

static int launcher_traverse(PyObject* op, visitproc visit, void* arg) {
  Launcher* self = (Launcher*)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->owner);
  Py_VISIT(self->module);
  Py_VISIT(self->gate);
  Py_VISIT(self->streams);
  Py_VISIT(self->ns);
  Py_VISIT(self->stream_type);
  Py_VISIT(self->dtypes);
  Py_VISIT(self->cai_dtypes);
  return 0;
}

static int launcher_clear(PyObject* op) {
  Launcher* self = (Launcher*)op;
  Py_CLEAR(self->owner);
  Py_CLEAR(self->module);
  Py_CLEAR(self->gate);
  Py_CLEAR(self->streams);
  Py_CLEAR(self->ns);
  Py_CLEAR(self->stream_type);
  Py_CLEAR(self->dtypes);
  Py_CLEAR(self->cai_dtypes);
  return 0;
}

static void launcher_dealloc(PyObject* op) {
  PyTypeObject* type = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  launcher_clear(op);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(op);
  Py_DECREF(type);
}

/* Kernel.launch (the Python method) with the call as it came: args[0:nargs]
 * positional, then one value per name in kwnames. */
static PyObject* launch_in_python(Launcher* self, PyObject* const* args,
                                  Py_ssize_t nargs, PyObject* kwnames) {
  if (self->owner == NULL) { /* cleared by the collector */
    PyErr_SetString(PyExc_ReferenceError, "the kernel is gone");
    return NULL;
  }
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
  if (nkw < 0) return NULL;
  PyObject* method =
      PyObject_GetAttr((PyObject*)Py_TYPE(self->owner), s_launch);
  if (method == NULL) return NULL;
  PyObject* r = NULL;
  PyObject* kw = NULL;
  PyObject* full = PyTuple_New(nargs + 1);
  if (full == NULL) goto done;
  Py_INCREF(self->owner);
  if (PyTuple_SetItem(full, 0, self->owner) != 0) goto done;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Py_INCREF(args[i]);
    if (PyTuple_SetItem(full, i + 1, args[i]) != 0) goto done;
  }
  if (nkw > 0) {
    kw = PyDict_New();
    if (kw == NULL) goto done;
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* name = PyTuple_GetItem(kwnames, i);
      if (name == NULL || PyDict_SetItem(kw, name, args[nargs + i]) != 0)
        goto done;
    }
  }
  r = PyObject_Call(method, full, kw);
done:
  Py_XDECREF(kw);
  Py_XDECREF(full);
  Py_DECREF(method);
  return r;
}

/* The torch dtypes to compare tensor arguments with (borrowed; NULL: none,
 * with no exception set, or an error). Settled once torch is imported; until
 * then Kernel._fast_dtypes registers torch or NumPy when either has been
 * imported since (what the Python method does before each launch). */
static PyObject* launcher_dtypes(Launcher* self, int* failed) {
  *failed = 0;
  if (self->dtypes != NULL) return self->dtypes;
  PyObject* modules = PyImport_GetModuleDict(); /* borrowed */
  if (modules == NULL) return NULL; /* interpreter shutdown: no torch */
  int torch = PyDict_GetItem(modules, s_torch) != NULL;
  if (!torch &&
      (g_numpy_registered || PyDict_GetItem(modules, s_numpy) == NULL))
    return NULL;
  PyObject* dt = PyObject_CallMethodObjArgs(self->owner, s_fast_dtypes, NULL);
  if (dt == NULL) {
    *failed = 1;
    return NULL;
  }
  if (!torch) {
    Py_DECREF(dt); /* None until torch is imported */
    return NULL;
  }
  self->dtypes = dt;
  return dt;
}

/* A vectorcall (METH_FASTCALL | METH_KEYWORDS): no tuple or dict is built
 * for a call. */
static PyObject* launcher_call(PyObject* op, PyObject* const* argv,
                               Py_ssize_t nargs, PyObject* kwnames) {
  Launcher* self = (Launcher*)op;
#define IN_PYTHON() launch_in_python(self, argv, nargs, kwnames)
  if (self->owner == NULL) return IN_PYTHON();
  /* launch(grid, block, args=(), stream=None, shared_bytes=0, cluster=None):
   * a call that does not bind plainly (a name twice, a missing or unknown
   * one, a key that is not the interned name) is Python's to refuse. */
  PyObject* v[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  PyObject* const names[6] = {s_grid,   s_block,        s_args,
                              s_stream, s_shared_bytes, s_cluster};
  if (nargs > 6) return IN_PYTHON();
  for (Py_ssize_t i = 0; i < nargs; ++i) v[i] = argv[i];
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
  if (nkw < 0) return NULL;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GetItem(kwnames, i);
    if (key == NULL) return NULL;
    int j = 0;
    while (j < 6 && key != names[j]) ++j;
    if (j == 6 || v[j] != NULL) return IN_PYTHON();
    v[j] = argv[nargs + i];
  }
  if (v[0] == NULL || v[1] == NULL) return IN_PYTHON();

  PyObject* flag = PyDict_GetItem(self->ns, s_use_fast_path); /* borrowed */
  int fast = flag == NULL ? 0 : PyObject_IsTrue(flag);
  if (fast < 0) return NULL;
  if (!fast || (v[5] != NULL && v[5] != Py_None)) return IN_PYTHON();
  /* The module's gate: closed with the module or with its runtime. */
  if (!gate_open(self->gate)) return IN_PYTHON(); /* it raises */

  fj_launch_config cfg;
  int ok = read_config(v[0], v[1], v[4] != NULL ? v[4] : s_zero, &cfg) == 0;
  PyObject* stream = v[3] != NULL ? v[3] : Py_None;
  Gate* sgate = NULL; /* the stream's gate (a new reference), or NULL */
  if (ok && stream != Py_None) {
    if ((PyObject*)Py_TYPE(stream) == self->stream_type) {
      PyObject* g = PyObject_GetAttr(stream, s_gate);
      if (g == NULL) return NULL;
      if (Py_TYPE(g) != (PyTypeObject*)g_gate_type || !gate_open((Gate*)g)) {
        Py_DECREF(g); /* a closed Stream: _live() raises FleetjitError */
        PyObject* h = PyObject_CallMethodObjArgs(stream, s_live, NULL);
        Py_XDECREF(h);
        return h == NULL ? NULL : IN_PYTHON();
      }
      sgate = (Gate*)g;
      cfg.stream = (fj_stream*)(uintptr_t)sgate->handle;
    } else {
      PyObject* cu = NULL;
      int rc = read_stream(stream, self->streams, &cfg.stream, &cu, &sgate);
      if (rc == 2) { /* Kernel.launch wraps it, then launches */
        Py_DECREF(cu);
        return IN_PYTHON();
      }
      ok = rc == 1;
      Py_XINCREF(sgate);
    }
  }
  fj_arg packed[FAST_MAX_ARGS];
  Py_ssize_t n = 0;
  if (ok) {
    int failed;
    PyObject* dtypes = launcher_dtypes(self, &failed);
    if (failed) {
      Py_XDECREF(sgate);
      return NULL;
    }
    ok = v[2] == NULL || pack_args(v[2], dtypes, self->cai_dtypes, packed, &n);
  }
  if (!ok) { /* the ctypes path packs it, or refuses it by name */
    Py_XDECREF(sgate);
    return PyObject_CallMethodObjArgs(
        self->owner, s_launch_ctypes, v[0], v[1], v[2] ? v[2] : s_empty, stream,
        v[4] ? v[4] : s_zero, v[5] ? v[5] : Py_None, NULL);
  }

  /* Packing may have run Python code (properties) that closed the module,
   * the stream or the runtime: test again, then count the launch in flight
   * in the module's gate (and so the runtime's) and the stream's while
   * fj_launch runs without the GIL, so that a close() on another thread
   * leaves the module, stream or runtime to be destroyed when it returns. */
  if (!gate_open(self->gate) || (sgate != NULL && !gate_open(sgate))) {
    Py_XDECREF(sgate);
    return IN_PYTHON();
  }
  Gate* gate = self->gate;
  Py_INCREF(gate);
  gate_count(gate);
  if (sgate != NULL) gate_count(sgate);
  fj_status* status = call_launch(self->fn, self->kernel, &cfg, packed, n);
  if (sgate != NULL) {
    gate_exit_call(sgate);
    Py_DECREF(sgate);
  }
  gate_exit_call(gate);
  Py_DECREF(gate);
  if (status != NULL) { /* errors.check raises it */
    PyObject* check = PyDict_GetItem(self->ns, s_check); /* borrowed */
    PyObject* st =
        PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)status);
    if (check == NULL || st == NULL) {
      Py_XDECREF(st);
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "fleetjit.runtime has no check");
      return NULL;
    }
    PyObject* r = PyObject_CallFunctionObjArgs(check, st, NULL);
    Py_DECREF(st);
    if (r == NULL) return NULL;
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
#undef IN_PYTHON
}

static PyType_Slot launcher_slots[] = {
    {Py_tp_traverse, (void*)launcher_traverse},
    {Py_tp_clear, (void*)launcher_clear},
    {Py_tp_dealloc, (void*)launcher_dealloc},
    {Py_tp_doc, (void*)"A kernel's compiled launch: what bind() binds."},
    {0, NULL}};

/* METH_FASTCALL | METH_KEYWORDS, with this calling convention, since
 * CPython 3.7 and in the stable ABI since 3.10; the 3.8 limited API this
 * module is built against does not name it yet. */
#ifndef METH_FASTCALL
#define METH_FASTCALL 0x0080
#endif
typedef PyObject* (*fastcall_keywords)(PyObject*, PyObject* const*, Py_ssize_t,
                                       PyObject*);
static PyMethodDef launch_def = {
    "launch", (PyCFunction)(void (*)(void))(fastcall_keywords)launcher_call,
    METH_FASTCALL | METH_KEYWORDS,
    "launch(grid, block, args=(), stream=None, shared_bytes=0, cluster=None): "
    "Kernel.launch, compiled."};

static PyType_Spec launcher_spec = {
    "fleetjit._fastlaunch.Launcher", sizeof(Launcher), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, launcher_slots};

/* bind(kernel, fj_kernel, fn, module, gate, streams, namespace, cai_dtypes):
 * the compiled launch of `kernel`, a builtin function bound to its
 * Launcher (see above). gate is its module's Gate; namespace is
 * fleetjit.runtime's globals: USE_FAST_PATH, read at each launch, check
 * and Stream; cai_dtypes is Kernel._cai_dtypes(). */
static PyObject* bind(PyObject* unused, PyObject* argv) {
  (void)unused;
  PyObject *owner, *module, *gate, *streams, *ns, *cai_dtypes;
  unsigned long long kernel, fn;
  if (!PyArg_ParseTuple(argv, "OKKOO!O!O!O", &owner, &kernel, &fn, &module,
                        (PyTypeObject*)g_gate_type, &gate, &PyDict_Type,
                        &streams, &PyDict_Type, &ns, &cai_dtypes))
    return NULL;
  PyObject* stream_type = PyDict_GetItem(ns, s_stream_cls); /* borrowed */
  if (stream_type == NULL) {
    PyErr_SetString(PyExc_TypeError, "the namespace has no Stream");
    return NULL;
  }
  allocfunc alloc =
      (allocfunc)PyType_GetSlot((PyTypeObject*)g_launcher_type, Py_tp_alloc);
  Launcher* self = (Launcher*)alloc((PyTypeObject*)g_launcher_type, 0);
  if (self == NULL) return NULL;
  self->fn = fn;
  self->kernel = kernel;
  self->owner = owner;
  self->module = module;
  self->gate = (Gate*)gate;
  self->streams = streams;
  self->ns = ns;
  self->stream_type = stream_type;
  self->dtypes = NULL;
  self->cai_dtypes = cai_dtypes;
  Py_INCREF(owner);
  Py_INCREF(module);
  Py_INCREF(gate);
  Py_INCREF(cai_dtypes);
  Py_INCREF(streams);
  Py_INCREF(ns);
  Py_INCREF(stream_type);
  PyObject* fn_obj = PyCFunction_NewEx(&launch_def, (PyObject*)self, NULL);
  Py_DECREF(self); /* the function holds it */
  return fn_obj;
}

/* register_types(torch_tensor_or_None, scalar_type, kind_codes,
 *                type_codes, typestrs) */
static PyObject* register_types(PyObject* self, PyObject* argv) {
  (void)self;
  PyObject *torch_tensor, *scalar_type, *kind_codes, *type_codes, *typestrs;
  if (!PyArg_ParseTuple(argv, "OOOOO", &torch_tensor, &scalar_type, &kind_codes,
                        &type_codes, &typestrs))
    return NULL;
  if (!PyDict_Check(kind_codes) || !PyDict_Check(type_codes) ||
      !PyDict_Check(typestrs)) {
    PyErr_SetString(PyExc_TypeError,
                    "kind_codes, type_codes and typestrs are dicts");
    return NULL;
  }
  Py_XDECREF(g_typestrs);
  g_typestrs = typestrs;
  Py_INCREF(g_typestrs);
  if (torch_tensor != Py_None && !PyType_Check(torch_tensor)) {
    PyErr_SetString(PyExc_TypeError, "torch_tensor is a type or None");
    return NULL;
  }
  g_numpy_registered = PyDict_Size(type_codes) > 0;
  Py_XDECREF(g_type_codes);
  g_type_codes = type_codes;
  Py_INCREF(g_type_codes);
  PyObject *is_contiguous = NULL, *data_ptr = NULL;
  if (torch_tensor != Py_None) {
    is_contiguous = PyObject_GetAttr(torch_tensor, s_is_contiguous);
    data_ptr =
        is_contiguous ? PyObject_GetAttr(torch_tensor, s_data_ptr) : NULL;
    if (data_ptr == NULL || !PyCallable_Check(is_contiguous) ||
        !PyCallable_Check(data_ptr)) {
      /* Not torch as we know it: every tensor looks its methods up. */
      PyErr_Clear();
      Py_CLEAR(is_contiguous);
      Py_CLEAR(data_ptr);
    }
  }
  g_shim.offset = 0; /* the binding turns it on again (torch_shim) */
  g_shim.live = 0;
  Py_XDECREF(g_tensor_is_contiguous);
  Py_XDECREF(g_tensor_data_ptr);
  g_tensor_is_contiguous = is_contiguous;
  g_tensor_data_ptr = data_ptr;
  Py_XDECREF(g_torch_tensor);
  Py_XDECREF(g_scalar_type);
  Py_XDECREF(g_kind_codes);
  g_torch_tensor = torch_tensor == Py_None ? NULL : torch_tensor;
  Py_XINCREF(g_torch_tensor);
  g_scalar_type = scalar_type;
  Py_INCREF(g_scalar_type);
  g_kind_codes = kind_codes;
  Py_INCREF(g_kind_codes);
  Py_RETURN_NONE;
}

/* The layout sizes this module was compiled with, for the binding's check
 * against its ctypes mirror. */
static PyObject* layout(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(nn)", (Py_ssize_t)sizeof(fj_arg),
                       (Py_ssize_t)sizeof(fj_launch_config));
}

static PyMethodDef methods[] = {
    {"launch", fast_launch, METH_VARARGS,
     "Packs arguments and calls fj_launch."},
    {"bind", bind, METH_VARARGS,
     "A kernel's launch as a C callable (a Launcher)."},
    {"register_types", register_types, METH_VARARGS,
     "Registers torch.Tensor, fleetjit Scalar and the kind codes."},
    {"torch_shim", torch_shim, METH_VARARGS,
     "Turns the torch tensor shim on or off."},
    {"torch_shim_words", torch_shim_words, METH_O,
     "The words after a torch.Tensor's object header."},
    {"torch_shim_read", torch_shim_read, METH_O,
     "A torch.Tensor as the shim reads it."},
    {"layout", layout, METH_NOARGS,
     "(sizeof(fj_arg), sizeof(fj_launch_config))"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_fastlaunch",
    "The compiled launch path of the fleetjit binding.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL};

static int intern(PyObject** out, const char* name) {
  *out = PyUnicode_InternFromString(name);
  return *out == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__fastlaunch(void) {
  if (intern(&s_is_cuda, "is_cuda") ||
      intern(&s_is_contiguous, "is_contiguous") ||
      intern(&s_data_ptr, "data_ptr") || intern(&s_dtype, "dtype") ||
      intern(&s_device_address, "device_address") || intern(&s_kind, "kind") ||
      intern(&s_value, "value") || intern(&s_cai, "__cuda_array_interface__") ||
      intern(&s_cuda_stream, "cuda_stream") || intern(&s_ptr, "ptr") ||
      intern(&s_grid, "grid") || intern(&s_block, "block") ||
      intern(&s_args, "args") || intern(&s_stream, "stream") ||
      intern(&s_shared_bytes, "shared_bytes") ||
      intern(&s_cluster, "cluster") || intern(&s_handle, "_handle") ||
      intern(&s_live, "_live") || intern(&s_launch, "launch") ||
      intern(&s_launch_ctypes, "_launch_ctypes") ||
      intern(&s_fast_dtypes, "_fast_dtypes") ||
      intern(&s_use_fast_path, "USE_FAST_PATH") || intern(&s_check, "check") ||
      intern(&s_stream_cls, "Stream") || intern(&s_torch, "torch") ||
      intern(&s_numpy, "numpy") || intern(&s_data, "data") ||
      intern(&s_shape, "shape") || intern(&s_strides, "strides") ||
      intern(&s_typestr, "typestr") || intern(&s_mask, "mask") ||
      intern(&s_gate, "_gate"))
    return NULL;
  if (s_zero == NULL && (s_zero = PyLong_FromLong(0)) == NULL) return NULL;
  if (s_empty == NULL && (s_empty = PyTuple_New(0)) == NULL) return NULL;
  if (g_launcher_type == NULL &&
      (g_launcher_type = PyType_FromSpec(&launcher_spec)) == NULL)
    return NULL;
  if (g_gate_type == NULL &&
      (g_gate_type = PyType_FromSpec(&gate_spec)) == NULL)
    return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  Py_INCREF(g_gate_type);
  if (PyModule_AddObject(m, "Gate", g_gate_type) != 0) {
    Py_DECREF(g_gate_type);
    Py_DECREF(m);
    return NULL;
  }
  /* This build leaves a float for an integer parameter to the ctypes path
   * (pack_args); _fast.py does not use a build without it. */
  if (PyModule_AddIntConstant(m, "INTEGER_PARAMS", 1) != 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
