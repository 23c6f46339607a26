#!/usr/bin/env python3
"""Self-test of scripts/ci/check-binding-parity: it passes on a fake tree
whose three idiomatic layers wrap every entry, and fails, naming the entry
and the language, on each way a layer can lack one (no wrapper, only a
comment, only a helper nobody public calls, a stale exception)."""

import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/ci/check-binding-parity")

HEADER = """/* fj_ghost(void) in a comment is not an entry */
#define FJ_API __attribute__((visibility("default")))
FJ_API uint32_t fj_version(void);
FJ_API fj_status* fj_alpha(fj_runtime* runtime,
                           int32_t x);
FJ_API const char* fj_beta_name(int v);
FJ_API const char* fj_gamma_name(int v);
"""

RUST_LIB = """pub fn version() -> u32 { unsafe { sys::fj_version() } }
fn helper(x: i32) -> Result<()> {
    check(unsafe { sys::fj_alpha(ptr::null_mut(), x) })
}
impl Runtime {
    pub fn alpha(&self) -> Result<()> { helper(1) }
}
"""
RUST_TOPIC = """impl fmt::Display for Beta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = unsafe { sys::fj_beta_name(0) };
        write!(f, "{}", s)
    }
}
pub fn gamma() -> String { unsafe { c_string(sys::fj_gamma_name(0)) } }
"""

GO_MAIN = """package fleetjit

/*
#include <fleetjit/fleetjit.h>
static const char* fjgo_beta_name(int v) { return fj_beta_name(v); }
#define FJGO_BETA(N) static const char* fjgo_beta##N(int v) { return fjgo_beta_name(v + N); }
FJGO_BETA(0)
*/
import "C"

func Version() uint32 { return uint32(C.fj_version()) }

func (r *Runtime) Alpha() error { return r.alpha() }

func (r *Runtime) alpha() error { return statusErr(C.fj_alpha(r.raw, 1)) }

func Beta() string { return C.GoString(C.fjgo_beta0(0)) }
"""
GO_TOPIC = """package fleetjit

import "C"

func Gamma() string { return C.GoString(C.fj_gamma_name(0)) }
"""

# The generated prototypes (a table's keys are not uses).
PY_ABI = '''FUNCTIONS = {
    "fj_version": (c_uint32, []),
    "fj_alpha": (_STATUS, [_HANDLE, c_int32]),
    "fj_beta_name": (c_char_p, [c_int]),
}
'''
PY_RUNTIME = '''def library_version():
    """Calls fj_gamma_name in the docstring only."""
    return lib().fj_version()


class Runtime:
    def alpha(self):
        return self._alpha()

    def _alpha(self):
        check(lib().fj_alpha(self._h, 1))


def beta():
    return _name(lib().fj_beta_name, 0)
'''
PY_TOPIC = '''_proto("fj_gamma_name", c_char_p, [c_int])


def gamma():
    return lib().fj_gamma_name(0)
'''

FILES = {
    "include/fleetjit/fleetjit.h": HEADER,
    "bindings/rust/fleetjit/src/lib.rs": RUST_LIB,
    "bindings/rust/fleetjit/src/topic.rs": RUST_TOPIC,
    "bindings/go/fleetjit.go": GO_MAIN,
    "bindings/go/topic.go": GO_TOPIC,
    "bindings/python/fleetjit/_abi.py": PY_ABI,
    "bindings/python/fleetjit/runtime.py": PY_RUNTIME,
    "bindings/python/fleetjit/topic.py": PY_TOPIC,
}

# (name, {path: (old, new)}, extra args, expected lines in the output)
CASES = [
    ("rust: only a private helper nobody calls", {"bindings/rust/fleetjit/src/lib.rs":
                                                  ("{ helper(1) }", "{ Ok(()) }")},
     ["rust: fj_alpha"]),
    ("rust: only a comment", {"bindings/rust/fleetjit/src/topic.rs":
                              ("pub fn gamma() -> String { unsafe { c_string(sys::fj_gamma_name(0)) } }",
                               "// sys::fj_gamma_name(0) some day\npub fn gamma() {}")},
     ["rust: fj_gamma_name"]),
    ("rust: a pub(crate) fn is not public", {"bindings/rust/fleetjit/src/topic.rs":
                                             ("pub fn gamma()", "pub(crate) fn gamma()")},
     ["rust: fj_gamma_name"]),
    ("go: the C helper is not called", {"bindings/go/fleetjit.go":
                                        ("C.GoString(C.fjgo_beta0(0))", '""')},
     ["go: fj_beta_name"]),
    ("go: the helper's helper does not call the entry", {"bindings/go/fleetjit.go":
                                                         ("return fj_beta_name(v);", "return 0;")},
     ["go: fj_beta_name"]),
    ("go: only an unexported func", {"bindings/go/topic.go": ("func Gamma()", "func gamma()")},
     ["go: fj_gamma_name"]),
    ("go: a _test.go file does not count", {"bindings/go/topic.go": ("package fleetjit", "package fleetjit_test")},
     None),  # renamed below
    ("python: the generated prototypes are not a use", {"bindings/python/fleetjit/runtime.py":
                                                        ("return _name(lib().fj_beta_name, 0)",
                                                         "return None")},
     ["python: fj_beta_name (not used by public code)"]),
    ("python: a docstring is not a use", {"bindings/python/fleetjit/runtime.py":
                                          ("return lib().fj_version()", "return 1")},
     ["python: fj_version (not used by public code)"]),
    ("python: a prototype row is not a use", {"bindings/python/fleetjit/topic.py":
                                              ("return lib().fj_gamma_name(0)", "return None")},
     ["python: fj_gamma_name (not used by public code)"]),
    ("python: a private helper nobody calls", {"bindings/python/fleetjit/runtime.py":
                                               ("return self._alpha()", "return None")},
     ["python: fj_alpha"]),
    ("header: a new entry lacks every binding", {"include/fleetjit/fleetjit.h":
                                                 ("FJ_API uint32_t fj_version(void);",
                                                  "FJ_API uint32_t fj_version(void);\nFJ_API void fj_delta(void);")},
     ["rust: fj_delta", "go: fj_delta", "python: fj_delta"]),
]


def write_tree(root, edits):
    for path, text in FILES.items():
        if path in edits:
            old, new = edits[path]
            assert old in text, (path, old)
            text = text.replace(old, new)
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(root, *extra):
    p = subprocess.run([sys.executable, CHECK, "--root", root, *extra], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        write_tree(good, {})
        rc, out = run(good)
        if rc != 0 or "4/4" not in out:
            failures.append("complete fake tree: rc %d, want 0:\n%s" % (rc, out))
        for i, (name, edits, want) in enumerate(CASES):
            root = os.path.join(tmp, "case%d" % i)
            write_tree(root, edits)
            if want is None:  # the _test.go case: rename the topic file
                os.rename(os.path.join(root, "bindings/go/topic.go"),
                          os.path.join(root, "bindings/go/topic_test.go"))
                want = ["go: fj_gamma_name"]
            rc, out = run(root)
            missing = [w for w in want if w not in out]
            if rc != 1 or missing:
                failures.append("%s: rc %d (want 1), missing %s in:\n%s" % (name, rc, missing, out))
            else:
                print("ok   %s -> %s" % (name, ", ".join(want)))
        # A stale exception (the binding wraps the entry) fails too.
        src = open(CHECK).read().replace("EXCEPTIONS = {\n",
                                         "EXCEPTIONS = {\n    (\"go\", \"fj_alpha\"): \"test\",\n"
                                         "    (\"go\", \"fj_gone\"): \"test\",\n", 1)
        stale = os.path.join(tmp, "check-stale")
        with open(stale, "w") as f:
            f.write(src)
        p = subprocess.run([sys.executable, stale, "--root", good], capture_output=True, text=True)
        out = p.stdout + p.stderr
        if (p.returncode != 1 or "go: fj_alpha is wrapped" not in out
                or "exception for fj_gone, which the header does not declare" not in out):
            failures.append("stale exceptions: rc %d:\n%s" % (p.returncode, out))
        else:
            print("ok   stale exceptions are errors")
    if failures:
        print("parity self-test FAILED:\n" + "\n".join(failures))
        return 1
    print("parity self-test: %d cases passed" % (len(CASES) + 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
