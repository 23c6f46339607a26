#!/usr/bin/env python3
"""The wheel as a new user runs it (gpu-check's wheel suite, in a fresh venv
and a bare environment): `live` imports fleetjit from the wheel, prints the
device report and the wheel's `fleetjit info`, builds SRC for the live GPU
and checks saxpy on fresh random data; `driver-only` (NVRTC hidden) expects
a clear build error, then loads and runs CUBIN, built on the CPU machine.

    wheel_check.py live|driver-only SRC CUBIN
"""
import os, random, struct, subprocess, sys, time
mode, src_path, cubin = sys.argv[1:4]
t0 = time.perf_counter()
import fleetjit
site = os.path.dirname(fleetjit.__file__)
src = open(src_path).read()
n = 1 << 20

def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]

def run(rt, module, label):
    """saxpy on fresh random data into a NaN-poisoned output, checked."""
    k = module.kernel("saxpy")
    rng = random.Random()
    x = [rng.uniform(-4, 4) for _ in range(n)]
    y = [rng.uniform(-4, 4) for _ in range(n)]
    a = f32(rng.uniform(0.5, 3))
    bx, by = rt.alloc(4 * n), rt.alloc(4 * n)
    bx.upload(struct.pack("%df" % n, *x)); by.upload(struct.pack("%df" % n, *y))
    out = rt.alloc(4 * n); out.fill(0xFF)  # poisoned: NaN
    out.copy_from(by)
    k.launch(grid=(n + 255) // 256, block=256, args=[out, bx, a, n])
    got = struct.unpack("%df" % n, out.download())
    want = [f32(f32(a * f32(xi)) + f32(yi)) for xi, yi in zip(x, y)]
    bad = sum(1 for g, w in zip(got, want) if not (abs(g - w) <= 1e-5 * max(1.0, abs(w))))
    print("%s: saxpy of %d floats, %d mismatches" % (label, n, bad))
    assert bad == 0

with fleetjit.Runtime() as rt:
    if mode == "live":
        print("import fleetjit: %.0f ms, from %s" % ((time.perf_counter() - t0) * 1e3, site))
        assert fleetjit.library_path() == os.path.join(site, "lib", "libfleetjit.so.1"), fleetjit.library_path()
        import importlib.util
        print("torch importable:", importlib.util.find_spec("torch") is not None,
              "| cupy importable:", importlib.util.find_spec("cupy") is not None)
        rep = rt.device_report()
        print("device report: fleetjit", rep["version"], "| devices:",
              [{k: d[k] for k in ("name", "compute_capability", "sm_count") if k in d} for d in rep["devices"]])
        t = time.perf_counter()
        m = rt.build(src, name="saxpy.cu")
        print("build for the live GPU: %.0f ms" % ((time.perf_counter() - t) * 1e3))
        run(rt, m, "built here")
    else:
        try:
            rt.build(src + "\n// driver only\n", name="saxpy.cu")
            sys.exit("driver only: the build succeeded (NVRTC was found after all)")
        except fleetjit.FleetjitError as e:
            print("driver only: build refused with %s: %s" % (e.code, e.message[:300]))
        if cubin:
            run(rt, rt.load(open(cubin, "rb").read(), name=os.path.basename(cubin)),
                "driver only, the CPU machine's sm_90 cubin")
if mode == "live":
    print(subprocess.run([os.path.join(site, "bin", "fleetjit"), "info"],
                         capture_output=True, text=True).stdout.strip()[:600])
