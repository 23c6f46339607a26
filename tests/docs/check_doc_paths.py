#!/usr/bin/env python3
"""Every docs/..., bench/results/... and examples/... path that a comment of
the source tree or a Markdown file (README.md, DEVELOPERS.md, docs/*.md, ...)
names must exist, and every file under bench/results/ must be named by one.

A results file may be named by its path or by its bare name (a dated
2026-12-05-....txt is a file of bench/results/). So the runs the docs cite
cannot be deleted, and a run no doc cites does not stay in the tree
(docs/measurements.md keeps the newest figure of each measurement; what it
replaced is in git).

Usage: check_doc_paths.py [REPO_ROOT | --self-test]. Prints each missing path with the
file and line that names it, and each results file nothing names; exits 1 if
there is one. A token with a glob or a placeholder (*, <, $, {) names no one
file and is skipped; one ending in / must be a folder.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and
                       not sys.argv[1].startswith("-") else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
# Preceded by nothing that could make it part of a longer path
# (bindings/python/examples/... is not examples/...).
PATH = re.compile(
    r"(?<![\w./-])((?:docs|bench/results|examples)/[\w./*<>${}-]*)")
# A results file named without its folder: a dated log.
RESULT = re.compile(r"(?<![\w./*-])(20\d\d-\d\d-\d\d-[\w.-]*\.txt)(?![\w*])")
RESULTS = "bench/results/"
C_LIKE = (".h", ".hh", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".rs",
          ".go", ".inc")
HASH = (".py", ".sh", ".cmake", ".txt", ".toml", ".cfg")
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
HASH_COMMENT = re.compile(r"#[^\n]*")
SKIP_DIRS = ("bench/results/", "build", "fuzz/corpus/", "shared/",
             "capi/abi/")


def tracked_files():
    """The repository's files (git's view, untracked ones included), or
    every file under ROOT when it is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-co",
                              "--exclude-standard"], check=True,
                             capture_output=True, text=True).stdout
        return [f for f in out.splitlines() if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return files


def comments(path, text):
    """(line, comment text) for each comment of `text`."""
    base = os.path.basename(path)
    if path.endswith(".md"):
        return [(1, text)]
    if path.endswith(C_LIKE):
        pattern = C_COMMENT
    elif path.endswith(HASH) or base == "CMakeLists.txt" or (
            "." not in base and text.startswith("#!")):
        pattern = HASH_COMMENT
    else:
        return []
    return [(text.count("\n", 0, m.start()) + 1, m.group(0))
            for m in pattern.finditer(text)]


def main():
    missing = []
    checked = 0
    cited = set()
    files = tracked_files()
    for rel in files:
        if rel.startswith(SKIP_DIRS) or not os.path.isfile(
                os.path.join(ROOT, rel)):
            continue
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for line, comment in comments(rel, text):
            for m in PATH.finditer(comment):
                token = m.group(1).rstrip(".,:;)`'\"")
                if any(c in token for c in "*<>${}"):
                    continue
                if token.rstrip("/") in ("docs", "examples", "bench/results"):
                    continue
                where = line + comment.count("\n", 0, m.start())
                target = os.path.join(ROOT, token)
                ok = (os.path.isdir(target) if token.endswith("/") else
                      os.path.exists(target))
                checked += 1
                cited.add(token)
                if not ok:
                    missing.append(f"{rel}:{where}: {token}")
            for m in RESULT.finditer(comment):
                token = RESULTS + m.group(1)
                if token in cited and os.path.exists(os.path.join(ROOT, token)):
                    continue
                where = line + comment.count("\n", 0, m.start())
                checked += 1
                cited.add(token)
                if not os.path.exists(os.path.join(ROOT, token)):
                    missing.append(f"{rel}:{where}: {m.group(1)} (in {RESULTS})")
    uncited = sorted(f for f in files if f.startswith(RESULTS) and
                     os.path.isfile(os.path.join(ROOT, f)) and f not in cited)
    for m in missing:
        print(f"missing: {m}")
    for u in uncited:
        print(f"uncited: {u} (no doc or comment names it: cite it where its "
              "figures are quoted, or git rm it)")
    print(f"check_doc_paths: {checked} references, {len(missing)} missing, "
          f"{len(uncited)} results files uncited")
    return 1 if missing or uncited else 0


def self_test():
    """The check run on a scratch repository: one named path exists, one
    does not, a glob and a longer path are skipped; a results file named by
    its path and one by its bare name count as cited, a bare name whose
    file is gone is missing, and a results file nothing names is uncited."""
    import tempfile
    global ROOT
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        os.makedirs(os.path.join(root, "src"))
        os.makedirs(os.path.join(root, "bench", "results"))
        for name in ("2026-01-01-a.txt", "2026-01-02-b.txt", "2026-01-03-c.txt"):
            open(os.path.join(root, "bench", "results", name), "w").write("run\n")
        open(os.path.join(root, "docs", "here.md"), "w").write(
            "Here. From `bench/results/2026-01-01-a.txt`.\n")
        open(os.path.join(root, "src", "a.cc"), "w").write(
            "// see docs/here.md, and docs/gone.md.\n"
            "const char* s = \"docs/not-a-comment.md\";\n"
            "/* examples/*.cu; bindings/python/examples/x.py */\n"
            "// 2026-01-02-b.txt, 2026-01-09-gone.txt; 2026-01-0*.txt\n")
        open(os.path.join(root, "README.md"), "w").write(
            "Read `docs/here.md`.\n")
        subprocess.run(["git", "-C", root, "init", "-q"], check=True)
        ROOT = root
        import io
        import contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main()
        out = buf.getvalue()
        wants = ("missing: src/a.cc:1: docs/gone.md",
                 "missing: src/a.cc:4: 2026-01-09-gone.txt",
                 "uncited: bench/results/2026-01-03-c.txt",
                 "6 references, 2 missing, 1 results files uncited")
        if rc != 1 or any(w not in out for w in wants) or \
                "not-a-comment" in out or "2026-01-01-a" in out or \
                "2026-01-02-b" in out:
            print(f"self-test failed (rc {rc}):\n{out}")
            return 1
    print("check_doc_paths self-test: passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main())
