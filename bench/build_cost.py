#!/usr/bin/env python3
"""Cold build cost of layer kernels against their plain twins (issue 49).

For every pair (a kernel on <fleetjit/copy.cuh> and the same job written
without it), runs `fleetjit build --target T FILE.cu -o DIR` in fresh
processes, each with a cache folder no build has used (or, with
--slow-path-library, one that holds only the slow-path libraries, made once
before the timing), and reports medians of the process's wall time and CPU
time (user + sys of the child), and layer / plain.

The pairs:
  - examples: examples/X.cu against bench/kernels/plain_X.cu, for every
    example that has such a twin;
  - corpus: bench/corpus/set*/X.cu against X_plain.cu.
Every timed source is a copy of the file with a unique comment appended, so
no cache of any tier can answer. Rounds are interleaved (each round builds
every file once), so a slow spell of the shared machine hits every row.

  python3 bench/build_cost.py [--fleetjit build/bin/fleetjit] [--target sm_90]
      [--rounds 3] [--impl tma|cp_async|sync] [--filter TEXT]
      [--slow-path-library] [--env NAME=VALUE]... [--define NAME=VALUE]...
      [--phases]

--define passes -D NAME=VALUE to every build (a copy-layer macro of
docs/copy-macros.md: `--define FJ_TMA_SMALL_TILES=0` times a default's
cost against the path it replaced; the plain twins ignore it).

--phases adds NVRTC's own phase times (front end, NVVM optimizer, PTX
translation, i.e. ptxas) of one in-process compile of each file through
libnvrtc's `--time` option (ctypes; -I include, the headers the library
embeds), for the breakdown.
"""
import argparse
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pairs(filter_text):
    out = []
    for ex in sorted((ROOT / "examples").glob("*.cu")):
        twin = ROOT / "bench" / "kernels" / f"plain_{ex.stem}.cu"
        if twin.exists():
            out.append((f"examples/{ex.stem}", ex, twin))
    for s in sorted((ROOT / "bench" / "corpus").glob("set*")):
        for layer in sorted(s.glob("*.cu")):
            if layer.stem.endswith("_plain"):
                continue
            twin = layer.with_name(f"{layer.stem}_plain.cu")
            if twin.exists():
                out.append((f"{s.name}/{layer.stem}", layer, twin))
    return [p for p in out if not filter_text or filter_text in p[0]]


class Runner:
    def __init__(self, args, work):
        self.args = args
        self.work = Path(work)
        self.count = 0
        self.env = dict(os.environ)
        for kv in args.env:
            k, _, v = kv.partition("=")
            self.env[k] = v
        if args.slow_path_library:
            self.env["FLEETJIT_SLOW_PATH_LIBRARY"] = "1"
        self.seed = None

    def unique_copy(self, src):
        self.count += 1
        d = self.work / f"src{self.count}"
        d.mkdir()
        dst = d / src.name
        text = src.read_text()
        dst.write_text(f"{text}\n// build_cost.py {os.getpid()} {self.count} {time.time()}\n")
        return dst

    def build(self, src, cache_dir):
        f = self.unique_copy(src)
        out = f.parent / "out"
        cmd = [self.args.fleetjit, "build", "--target", self.args.target,
               str(f), "-o", str(out)]
        if self.args.impl:
            cmd += ["--impl", self.args.impl]
        for d in self.args.define:
            cmd += ["-D", d]
        env = dict(self.env)
        env["FLEETJIT_CACHE_DIR"] = str(cache_dir)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            sys.exit(f"build failed: {' '.join(cmd)}\n{r.stdout}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall * 1000, cpu * 1000

    def cache_for_run(self):
        self.count += 1
        if self.seed is None:
            d = self.work / f"cache{self.count}"
            return d  # a folder no build has used (fleetjit makes it)
        return self.seed  # the libraries only (and earlier unique modules)


def nvrtc_phases(path, target, impl):
    """NVRTC 12.8+'s --time CSV for one compile: {phase: ms}."""
    lib = ctypes.CDLL(os.environ.get("FJ_LIBNVRTC", "libnvrtc.so"))
    impls = {"sync": 0, "cp_async": 1, "tma": 2}
    opts = [f"-arch={target}", "-std=c++17", f"-I{ROOT / 'include'}",
            "-I/usr/local/cuda/include"]
    if impl:
        opts.append(f"-DFJ_COPY_IMPL={impls[impl]}")
    elif "#include <fleetjit/copy.cuh>" in path.read_text():
        arch = int(target.split("_")[1])
        opts.append(f"-DFJ_COPY_IMPL={2 if arch >= 90 else 1 if arch >= 80 else 0}")
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "time.csv"  # a new file: NVRTC writes it whole
        opts.append(f"--time={csv}")
        prog = ctypes.c_void_p()
        src = path.read_text().encode()
        if lib.nvrtcCreateProgram(ctypes.byref(prog), src, path.name.encode(),
                                  0, None, None) != 0:
            sys.exit("nvrtcCreateProgram failed")
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        r = lib.nvrtcCompileProgram(prog, len(opts), arr)
        if r != 0:
            sys.exit(f"nvrtcCompileProgram({path}) failed: {r}")
        ptx = ctypes.c_size_t()
        if lib.nvrtcGetPTXSize(prog, ctypes.byref(ptx)) != 0:
            sys.exit("nvrtcGetPTXSize failed")
        if lib.nvrtcDestroyProgram(ctypes.byref(prog)) != 0:
            sys.exit("nvrtcDestroyProgram failed")
        phases = {}
        for line in csv.read_text().splitlines()[1:]:
            cells = [c.strip() for c in line.split(",")]
            if len(cells) >= 3:
                phases[cells[1]] = float(cells[2])
        phases["PTX KB"] = ptx.value / 1024
        return phases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleetjit", default=str(ROOT / "build" / "bin" / "fleetjit"))
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--impl", default="")
    ap.add_argument("--filter", default="")
    ap.add_argument("--slow-path-library", action="store_true")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--define", action="append", default=[])
    ap.add_argument("--phases", action="store_true")
    args = ap.parse_args()
    todo = pairs(args.filter)
    if not todo:
        sys.exit("no pairs")
    with tempfile.TemporaryDirectory(prefix="fj-build-cost-") as work:
        run = Runner(args, work)
        if args.slow_path_library:
            # One build of each layer kernel fills the seed folder with the
            # libraries it needs; the process's exit waits for them.
            run.seed = Path(work) / "seed"
            for _, layer, _ in todo:
                run.build(layer, run.seed)
        times = {name: ([], []) for name, _, _ in todo}
        for _ in range(args.rounds):
            for name, layer, plain in todo:
                for i, f in enumerate((layer, plain)):
                    times[name][i].append(run.build(f, run.cache_for_run()))
    mode = "FLEETJIT_SLOW_PATH_LIBRARY=1, libraries on disk" if args.slow_path_library else "default route, new cache folder"
    defines = "".join(f" -D {d}" for d in args.define)
    print(f"# fleetjit build --target {args.target}{' --impl ' + args.impl if args.impl else ''}{defines}: "
          f"fresh process per build, {mode}, median of {args.rounds} (wall; CPU = user + sys)")
    print(f"{'kernel':28} {'layer ms':>9} {'plain ms':>9} {'ratio':>6}   {'layer CPU':>9} {'plain CPU':>9} {'ratio':>6}")
    ratios = []
    for name, _, _ in todo:
        lw = statistics.median(t[0] for t in times[name][0])
        pw = statistics.median(t[0] for t in times[name][1])
        lc = statistics.median(t[1] for t in times[name][0])
        pc = statistics.median(t[1] for t in times[name][1])
        ratios.append(lw / pw)
        print(f"{name:28} {lw:9.0f} {pw:9.0f} {lw / pw:5.2f}x   {lc:9.0f} {pc:9.0f} {lc / pc:5.2f}x")
    print(f"wall ratio: median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x; "
          f"goal <= 2x for every pair")
    if args.phases:
        print("\n# NVRTC phases of one in-process compile (ms; --time), layer | plain")
        print(f"{'kernel':28} {'front':>6} {'NVVM':>6} {'ptxas':>6} {'PTX KB':>7} | {'front':>6} {'NVVM':>6} {'ptxas':>6} {'PTX KB':>7}")
        keys = ("CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation", "PTX KB")
        for name, layer, plain in todo:
            cells = []
            for f in (layer, plain):
                ph = nvrtc_phases(f, args.target, args.impl if f is layer else "")
                cells.append(" ".join(f"{ph.get(k, float('nan')):6.0f}" if k != "PTX KB"
                                      else f"{ph.get(k, 0):7.1f}" for k in keys))
            print(f"{name:28} {cells[0]} | {cells[1]}")


if __name__ == "__main__":
    main()
