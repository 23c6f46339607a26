"""`fleetjit` on PATH from a pip install: runs the CLI the wheel carries,
else (a source install of the binding) the next `fleetjit` on PATH."""
import os
import shutil
import sys

CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fleetjit")


def _other_cli():
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        c = shutil.which("fleetjit", path=d) if d else None
        if c and os.path.realpath(c) != me:
            return c
    return None


def main():
    cli = CLI if os.access(CLI, os.X_OK) else _other_cli()
    if cli is None:
        sys.stderr.write(f"fleetjit: no CLI at {CLI} and none on PATH (a source install "
                         "of the binding carries none; install the wheel or the library's "
                         "package)\n")
        return 2
    os.execv(cli, [cli] + sys.argv[1:])
