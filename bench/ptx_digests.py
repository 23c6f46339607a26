#!/usr/bin/env python3
"""SHA-256 of the PTX NVRTC makes of every layer kernel (examples/*.cu and
bench/corpus/set*/*.cu that include <fleetjit/copy.cuh>) under each copy
implementation and target: sm_90 tma, cp_async, sync; sm_80 cp_async, sync;
sm_75 sync (compute_XX, so ptxas does not run: the same PTX gives the same
SASS). A change to the copy layer that must keep the generated code the same
runs it before and after and compares:

  python3 bench/ptx_digests.py [-D NAME=VALUE]... > before.txt
  (change include/fleetjit/...)
  python3 bench/ptx_digests.py [-D NAME=VALUE]... | diff before.txt -

--impl NAME keeps one implementation's rows; --self-test checks canonical()
(ctest's ptx_digests_self_test). For a committed state's
headers: git archive COMMIT include | tar -x -C OLD, then
python3 bench/ptx_digests.py --include OLD/include ...

The headers come from ./include (-I), as the library embeds them at build
time. Extra -D options reach every compile (e.g. -D FJ_CHECK=1).

The digest is of canonical PTX (canonical() below): an edit of a header
changes the token of the translation unit in internal names
(`_ZN49_INTERNAL_00000000_18_pipelined_tiles_cu_1e3612c2...`), and may
renumber the string constants or reorder the forward declarations of
functions, none of which changes the code.
"""
import ctypes
import hashlib
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMBOS = [("compute_90", 2), ("compute_90", 1), ("compute_90", 0),
          ("compute_80", 1), ("compute_80", 0), ("compute_75", 0)]
NAMES = {0: "sync", 1: "cp_async", 2: "tma"}


TU_NAME = rb"(\d+)(_(?:INTERNAL|GLOBAL__N)_\w+)"


def tu_name(m):
    """`41_INTERNAL_..._rmsnorm_cu_1e3612c2` + the rest -> `TU` + the rest."""
    n = int(m.group(1))
    name = m.group(2)
    if len(name) < n:
        return m.group(0)
    return b"TU" + re.sub(TU_NAME, tu_name, name[n:])  # nested ones too


def canonical(ptx):
    """The PTX with what an edit of a header may change without changing
    the code: the translation unit's token in internal names (see above),
    the numbering of the string constants ($str, $str$1, ...: renumbered
    in the order they appear) and the forward declarations of functions
    (a `.func`/`.extern .func` header ending in `;`, which NVRTC orders by
    when it first meets each function)."""
    ptx = re.sub(TU_NAME, tu_name, ptx)
    names = {}
    ptx = re.sub(rb"\$str(?:\$\d+)?\b",
                 lambda m: names.setdefault(m.group(0), b"$s%d" % len(names)),
                 ptx)
    out, block = [], None
    for line in ptx.split(b"\n"):
        if block is not None:
            block.append(line)
            if line.strip() == b";":
                block = None  # a declaration: dropped
            elif line.strip().startswith(b"{"):
                out += block
                block = None
            continue
        if re.match(rb"(\.extern |\.weak |\.visible )?\.func\b", line):
            if line.rstrip().endswith(b";"):
                continue
            block = [line]
            continue
        out.append(line)
    if block is not None:
        out += block
    return b"\n".join(out)


SELF_TEST_A = b"""\
.extern .func  (.param .b32 func_retval0) vprintf
(
\t.param .b64 vprintf_param_0
)
;
.func _ZN2fj6detail11report_elemEi
(
\t.param .b32 _ZN2fj6detail11report_elemEi_param_0
)
;
.global .align 4 .u32 _ZN41_INTERNAL_00000000_10_rmsnorm_cu_1e3612c22fj9copy_implE = 2;
.global .align 4 .f32 _ZN41_INTERNAL_00000000_10_rmsnorm_cu_1e3612c243_GLOBAL__N__00000000_10_rmsnorm_cu_1e3612c26kLog2eE;
.global .align 1 .b8 $str$9[2] = {65, 0};
.func _ZN2fj6detail11report_elemEi(
\t.param .b32 _ZN2fj6detail11report_elemEi_param_0
)
{
\tmov.u64 %rd1, $str$9;
\tadd.s32 %r1, %r1, 1;
}
"""


def self_test():
    """canonical() equates what a header edit changes without changing the
    code, and nothing else."""
    a = SELF_TEST_A
    # Another TU token (the stem instead of a hash), the forward
    # declarations in another order, the string renumbered.
    b = (a.replace(b"41_INTERNAL_00000000_10_rmsnorm_cu_1e3612c2",
                   b"40_INTERNAL_00000000_10_rmsnorm_cu_rmsnorm")
          .replace(b"43_GLOBAL__N__00000000_10_rmsnorm_cu_1e3612c2",
                   b"42_GLOBAL__N__00000000_10_rmsnorm_cu_rmsnorm")
          .replace(b"$str$9", b"$str$8"))
    decl_v = a[:a.index(b".func _ZN2fj6detail11report_elemEi\n")]
    decl_r = a[len(decl_v):a.index(b".global")]
    b = decl_r + decl_v + b[len(decl_v) + len(decl_r):]
    assert b != a and canonical(b) == canonical(a), "equal code must match"
    for changed in (a.replace(b"add.s32 %r1, %r1, 1", b"add.s32 %r1, %r1, 2"),
                    a.replace(b"{65, 0}", b"{66, 0}"),
                    a.replace(b"copy_implE = 2", b"copy_implE = 1"),
                    a.replace(b"(\n\t.param .b32 _ZN2fj6detail11report_elemEi_param_0\n)\n{",
                              b"(\n\t.param .b64 _ZN2fj6detail11report_elemEi_param_0\n)\n{")):
        assert changed != a and canonical(changed) != canonical(a), \
            "a change of code must not match"
    print("ptx_digests self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    defines = []
    include = ROOT / "include"
    only = None
    args = sys.argv[1:]
    while args:
        if args[0] == "--impl" and len(args) > 1:  # that implementation only
            only = args[1]
            args = args[2:]
        elif args[0] == "--include" and len(args) > 1:
            include = Path(args[1]).resolve()
            args = args[2:]
        elif args[0] == "-D" and len(args) > 1:
            defines.append("-D" + args[1])
            args = args[2:]
        else:
            sys.exit(__doc__)
    lib = ctypes.CDLL(os.environ.get("FJ_LIBNVRTC", "libnvrtc.so"))
    files = sorted((ROOT / "examples").glob("*.cu")) + sorted(
        (ROOT / "bench" / "corpus").glob("set*/*.cu"))
    for f in files:
        src = f.read_text()
        if "#include <fleetjit/copy.cuh>" not in src:
            continue
        for arch, impl in COMBOS:
            if only is not None and NAMES[impl] != only:
                continue
            opts = [f"-arch={arch}", "-std=c++17", f"-DFJ_COPY_IMPL={impl}",
                    f"-I{include}", "-I/usr/local/cuda/include"] + defines
            prog = ctypes.c_void_p()
            if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(),
                                      f.name.encode(), 0, None, None) != 0:
                sys.exit("nvrtcCreateProgram failed")
            arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            r = lib.nvrtcCompileProgram(prog, len(opts), arr)
            rel = f.relative_to(ROOT)
            if r != 0:
                digest = f"compile error {r}"
            else:
                n = ctypes.c_size_t()
                if lib.nvrtcGetPTXSize(prog, ctypes.byref(n)) != 0:
                    sys.exit("nvrtcGetPTXSize failed")
                buf = ctypes.create_string_buffer(n.value)
                if lib.nvrtcGetPTX(prog, buf) != 0:
                    sys.exit("nvrtcGetPTX failed")
                ptx = canonical(buf.raw)
                digest = hashlib.sha256(ptx).hexdigest()[:16]
            if lib.nvrtcDestroyProgram(ctypes.byref(prog)) != 0:
                sys.exit("nvrtcDestroyProgram failed")
            print(f"{rel} {arch} {NAMES[impl]} {digest}", flush=True)


if __name__ == "__main__":
    main()
