#!/usr/bin/env python3
"""The folder graph of src/ (and the load generator) from the #include lines:
every arrow must point to a lower floor, so there is no cycle and no upward
arrow. Prints the graph; exits 1 naming each arrow that breaks the order.

  scripts/check_layers.py [REPO_ROOT]
"""
import pathlib
import re
import sys

# Floors, lowest first (docs/ARCHITECTURE.md draws the same order). A folder
# may include only folders on lower floors.
FLOORS = [
    ["base"],
    ["runtime", "gguf", "jinja", "structured", "sched"],
    ["kernels", "tokenizer"],
    ["kvcache"],
    ["model"],
    ["engine"],
    ["server"],
]
# The load generator measures any OpenAI-compatible server: never the engine.
LOADGEN_MAY = {"base", "sched"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def arrows(folder):
    out = set()
    for f in folder.rglob("*"):
        if f.suffix in (".h", ".cc"):
            out.update(INCLUDE.findall(f.read_text(errors="replace")))
    out.discard(folder.name)
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    floor = {name: i for i, names in enumerate(FLOORS) for name in names}
    bad = []
    src = root / "src"
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    for name in folders:
        if name not in floor:
            bad.append(f"src/{name}: a folder on no floor (add it to FLOORS)")
            continue
        deps = sorted(d for d in arrows(src / name) if (src / d).is_dir())
        print(f"{name} (floor {floor[name]}) -> {' '.join(deps) or '-'}")
        for d in deps:
            if d not in floor or floor[d] >= floor[name]:
                bad.append(f"src/{name} -> {d}: not to a lower floor")
    loadgen = arrows(root / "tools" / "loadgen") & set(folders)
    print(f"tools/loadgen -> {' '.join(sorted(loadgen)) or '-'}")
    bad += [f"tools/loadgen -> {d}: the load generator may use only {sorted(LOADGEN_MAY)}"
            for d in sorted(loadgen - LOADGEN_MAY)]
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
