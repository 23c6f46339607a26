"""`fleetjit` on PATH from a wheel: runs the CLI the wheel carries."""
import os
import sys

CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fleetjit")


def main():
    if not os.access(CLI, os.X_OK):
        sys.stderr.write(f"fleetjit: no CLI at {CLI} (a source install of the binding "
                         "carries none; install a wheel, or the library's package)\n")
        return 2
    os.execv(CLI, [CLI] + sys.argv[1:])
