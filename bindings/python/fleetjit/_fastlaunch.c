/* _fastlaunch: the compiled launch path of the fleetjit Python binding.
 *
 * One call packs a launch's arguments into an fj_arg array on the C stack
 * and calls fj_launch, with no ctypes object and no DLPack capsule per
 * launch. It handles the arguments that hot loops pass: Python int (int32)
 * and float (float32), fleetjit Scalars, NumPy scalars, torch tensors
 * (data_ptr() of a contiguous CUDA tensor), fleetjit DeviceBuffers and objects
 * with a C-contiguous __cuda_array_interface__. For anything else, or anything
 * it would have to refuse or warn about (a non-contiguous view, a dtype
 * that differs from the kernel's parameter), it returns NotImplemented and
 * the binding takes its pure-ctypes path, which explains the refusal. The
 * binding works without this module (fleetjit/runtime.py falls back).
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
#include <stdint.h>
#include <string.h>

#include "fleetjit/fleetjit.h"

#define FAST_MAX_ARGS 64

typedef fj_status* (*launch_fn)(fj_kernel*, const fj_launch_config*,
                                const fj_arg*, size_t);

/* Registered once by the binding (register_types). */
static PyObject* g_torch_tensor = NULL; /* torch.Tensor, or NULL */
static PyObject* g_scalar_type = NULL;  /* fleetjit.args.Scalar */
static PyObject* g_kind_codes = NULL;   /* {"i32": FJ_ARG_I32, ...} */
static PyObject* g_type_codes = NULL;   /* {numpy.float32: FJ_ARG_F32, ...} */
/* Interned attribute names. */
static PyObject *s_is_cuda, *s_is_contiguous, *s_data_ptr, *s_dtype,
    *s_device_address, *s_kind, *s_value, *s_cai, *s_cuda_stream, *s_ptr;

/* Fills dims[3] from an int or a tuple of up to 3 ints; 0 on success. */
static int read_dims(PyObject* v, uint32_t dims[3], uint32_t fill) {
  dims[0] = dims[1] = dims[2] = fill;
  if (v == Py_None) return 0;
  if (PyLong_Check(v)) {
    unsigned long x = PyLong_AsUnsignedLong(v);
    if (PyErr_Occurred() || x > 0xFFFFFFFFul) return -1;
    dims[0] = (uint32_t)x;
    return 0;
  }
  if (!PyTuple_Check(v)) return -1;
  Py_ssize_t n = PyTuple_Size(v);
  if (n > 3) return -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GetItem(v, i);
    if (!PyLong_Check(item)) return -1;
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
static int fill_torch(PyObject* t, PyObject* want_dtype, fj_arg* a) {
  PyObject* v = PyObject_GetAttr(t, s_is_cuda);
  if (v == NULL) return -1;
  int cuda = v == Py_True;
  Py_DECREF(v);
  if (!cuda) return 0; /* CPU or pinned: the ctypes path decides */
  v = PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
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
  v = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
  if (v == NULL) return -1;
  uint64_t p = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  if (PyErr_Occurred()) return -1;
  a->kind = FJ_ARG_POINTER;
  a->v.pointer = p;
  return 1;
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

/* A C-contiguous __cuda_array_interface__ of a known itemsize. */
static int fill_cai(PyObject* obj, fj_arg* a) {
  PyObject* cai = PyObject_GetAttr(obj, s_cai);
  if (cai == NULL) {
    PyErr_Clear();
    return 0;
  }
  int rc = 0;
  if (!PyDict_Check(cai)) goto done;
  PyObject* strides = PyDict_GetItemString(cai, "strides");
  if (strides != NULL && strides != Py_None) goto done; /* ctypes path */
  PyObject* data = PyDict_GetItemString(cai, "data");
  if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) < 1) goto done;
  PyObject* ptr = PyTuple_GetItem(data, 0);
  if (!PyLong_Check(ptr)) goto done;
  a->kind = FJ_ARG_POINTER;
  a->v.pointer = PyLong_AsUnsignedLongLong(ptr);
  rc = PyErr_Occurred() ? -1 : 1;
done:
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

static int fill_one(PyObject* v, PyObject* want_dtype, fj_arg* a) {
  if (PyLong_CheckExact(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < INT32_MIN || x > INT32_MAX) return 0;
    a->kind = FJ_ARG_I32;
    a->v.i32 = (int32_t)x;
    return 1;
  }
  if (PyFloat_CheckExact(v)) {
    a->kind = FJ_ARG_F32;
    a->v.f32 = (float)PyFloat_AsDouble(v);
    return 1;
  }
  PyObject* type = (PyObject*)Py_TYPE(v);
  if (g_torch_tensor != NULL &&
      (type == g_torch_tensor || PyObject_IsInstance(v, g_torch_tensor) == 1))
    return fill_torch(v, want_dtype, a);
  if (g_scalar_type != NULL && type == g_scalar_type) return fill_scalar(v, a);
  if (g_type_codes != NULL) {
    PyObject* code = PyDict_GetItem(g_type_codes, type); /* borrowed */
    if (code != NULL) return fill_typed_scalar(v, PyLong_AsLong(code), a);
  }
  if (PyObject_HasAttr(v, s_device_address)) {
    uint64_t p;
    if (attr_u64(v, s_device_address, &p) != 0) {
      PyErr_Clear();
      return 0;
    }
    a->kind = FJ_ARG_POINTER;
    a->v.pointer = p;
    return 1;
  }
  if (want_dtype != NULL && want_dtype != Py_None) return 0;
  return fill_cai(v, a);
}

static PyObject* not_handled(void) {
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

/* launch(fn, kernel, grid, block, shared, fj_stream, stream_obj, streams,
 *        args, dtypes)
 *   fn:         address of fj_launch
 *   kernel:     fj_kernel* as an int
 *   grid/block: int or tuple of <= 3 ints
 *   fj_stream:  fj_stream* as an int (0 = legacy default), used when
 *               stream_obj is None
 *   stream_obj: a framework stream (.cuda_stream or .ptr) or an integer
 *               CUstream, looked up in `streams` ({CUstream: fj_stream*})
 *   args:       a list or a tuple (anything else: NotImplemented)
 *   dtypes:     None or a tuple, per parameter: the dtype object a tensor
 *               argument should have, or None
 * Returns None (launched), an int (the fj_status* of a failed launch: the
 * binding raises it), ("wrap", CUstream) when the stream has no fj_stream
 * yet, or NotImplemented (take the ctypes path). */
static PyObject* fast_launch(PyObject* self, PyObject* argv) {
  (void)self;
  unsigned long long fn_addr, kernel;
  unsigned long long fj_stream_addr;
  PyObject *grid, *block, *shared, *stream_obj, *streams, *args, *dtypes;
  if (!PyArg_ParseTuple(argv, "KKOOOKOOOO", &fn_addr, &kernel, &grid, &block,
                        &shared, &fj_stream_addr, &stream_obj, &streams, &args,
                        &dtypes))
    return NULL;
  fj_launch_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.struct_size = sizeof(cfg);
  /* shared_bytes as read_dims reads a dimension: an int that fits uint32,
   * else the ctypes path, which refuses it by name. */
  uint32_t shared_bytes[3];
  if (read_dims(grid, cfg.grid, 1) != 0 || read_dims(block, cfg.block, 1) ||
      !PyLong_Check(shared) || read_dims(shared, shared_bytes, 0) != 0) {
    PyErr_Clear();
    return not_handled();
  }
  cfg.shared_bytes = shared_bytes[0];
  if (stream_obj == Py_None) {
    cfg.stream = (fj_stream*)(uintptr_t)fj_stream_addr;
  } else {
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
        return not_handled();
      }
    }
    unsigned long long cu_value = PyLong_AsUnsignedLongLong(cu);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      Py_DECREF(cu);
      return not_handled();
    }
    if (cu_value != 0) {
      PyObject* fjs =
          PyDict_Check(streams) ? PyDict_GetItem(streams, cu) : NULL;
      if (fjs == NULL) {
        PyObject* r = Py_BuildValue("(sO)", "wrap", cu);
        Py_DECREF(cu);
        return r;
      }
      cfg.stream = (fj_stream*)(uintptr_t)PyLong_AsUnsignedLongLong(fjs);
    }
    Py_DECREF(cu);
  }

  /* A list or a tuple, read with borrowed references; anything else (a
   * generator...) is the ctypes path's. */
  int is_list = PyList_Check(args);
  if (!is_list && !PyTuple_Check(args)) return not_handled();
  Py_ssize_t n = is_list ? PyList_Size(args) : PyTuple_Size(args);
  if (n > FAST_MAX_ARGS) return not_handled();
  Py_ssize_t num_dtypes =
      (dtypes != Py_None && PyTuple_Check(dtypes)) ? PyTuple_Size(dtypes) : 0;
  fj_arg packed[FAST_MAX_ARGS];
  for (Py_ssize_t i = 0; i < n; ++i) {
    fj_arg* a = &packed[i];
    memset(a, 0, sizeof(*a));
    a->struct_size = sizeof(fj_arg);
    PyObject* want = i < num_dtypes ? PyTuple_GetItem(dtypes, i) : NULL;
    PyObject* item =
        is_list ? PyList_GetItem(args, i) : PyTuple_GetItem(args, i);
    if (item == NULL) return NULL;
    Py_INCREF(item); /* fill_one may run Python code (properties) */
    int rc = fill_one(item, want, a);
    Py_DECREF(item);
    if (rc <= 0) {
      if (rc < 0) PyErr_Clear();
      return not_handled();
    }
  }

  launch_fn launch = (launch_fn)(uintptr_t)fn_addr;
  fj_status* status;
  Py_BEGIN_ALLOW_THREADS status =
      launch((fj_kernel*)(uintptr_t)kernel, &cfg, n ? packed : NULL, (size_t)n);
  Py_END_ALLOW_THREADS if (status != NULL) return PyLong_FromUnsignedLongLong(
      (unsigned long long)(uintptr_t)status);
  Py_RETURN_NONE;
}

/* register_types(torch_tensor_or_None, scalar_type, kind_codes,
 *                type_codes) */
static PyObject* register_types(PyObject* self, PyObject* argv) {
  (void)self;
  PyObject *torch_tensor, *scalar_type, *kind_codes, *type_codes;
  if (!PyArg_ParseTuple(argv, "OOOO", &torch_tensor, &scalar_type, &kind_codes,
                        &type_codes))
    return NULL;
  if (!PyDict_Check(kind_codes) || !PyDict_Check(type_codes)) {
    PyErr_SetString(PyExc_TypeError, "kind_codes and type_codes are dicts");
    return NULL;
  }
  Py_XDECREF(g_type_codes);
  g_type_codes = type_codes;
  Py_INCREF(g_type_codes);
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
    {"register_types", register_types, METH_VARARGS,
     "Registers torch.Tensor, fleetjit Scalar and the kind codes."},
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

PyMODINIT_FUNC PyInit__fastlaunch(void) {
  s_is_cuda = PyUnicode_InternFromString("is_cuda");
  s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  s_data_ptr = PyUnicode_InternFromString("data_ptr");
  s_dtype = PyUnicode_InternFromString("dtype");
  s_device_address = PyUnicode_InternFromString("device_address");
  s_kind = PyUnicode_InternFromString("kind");
  s_value = PyUnicode_InternFromString("value");
  s_cai = PyUnicode_InternFromString("__cuda_array_interface__");
  s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
  s_ptr = PyUnicode_InternFromString("ptr");
  return PyModule_Create(&module_def);
}
