#!/usr/bin/env python3
"""Fails when a src/ file includes a header of a room it may not use (../shared/DESIGN.md,
"Layout"): lower layers never include higher ones. Run by ctest as `layering`."""
import pathlib
import re
import sys

# room -> rooms it may include (besides itself). Keep in step with DESIGN.md and src/CMakeLists.txt.
ALLOWED = {
    "core": set(),
    "io": {"core"},
    "quant": {"core"},
    "format": {"core", "quant", "io"},
    "backend": {"core", "quant"},
    "experts": {"core", "backend", "format", "io", "quant"},
    "model": {"core", "experts", "backend", "format", "io", "quant"},
    "runtime": {"core", "model", "experts", "backend", "format", "io", "quant", "text"},
    "text": {"core"},
    "store": {"core", "format", "io", "quant"},
    "server": set(),
    "cli": set(),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent / "src"
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
            continue
        room = path.relative_to(root).parts[0]
        if room not in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            if target in ALLOWED and target != room and target not in ALLOWED[room]:
                problems.append(f"{path.relative_to(root.parent)}:{number}: {room}/ may not include {target}/")
    for problem in problems:
        print(problem)
    print(f"layering: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
