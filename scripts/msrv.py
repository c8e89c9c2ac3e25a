#!/usr/bin/env python3
"""Checks that the workspace's declared minimum Rust version is the one its locked
dependencies really need: the highest `rust-version` among the packages Cargo.lock resolves for
Linux (normal, build and dev dependencies of every member).

    python3 scripts/msrv.py            # prints the version needed and which crates need it
    python3 scripts/msrv.py --check    # exits 1 if Cargo.toml says otherwise
"""
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PLATFORM = "x86_64-unknown-linux-gnu"


def version(text):
    """A version as a tuple of three numbers: "1.88" and "1.88.0" are the same version."""
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def needed():
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", PLATFORM],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    resolved = {node["id"] for node in metadata["resolve"]["nodes"]}
    members = set(metadata["workspace_members"])
    found = [
        (version(p["rust_version"]), p["rust_version"], p["name"])
        for p in metadata["packages"]
        if p["id"] in resolved and p["id"] not in members and p.get("rust_version")
    ]
    top = max(v for v, _, _ in found)
    return top, sorted({name for v, _, name in found if v == top})


def declared():
    manifest = (ROOT / "Cargo.toml").read_text()
    match = re.search(r'^rust-version\s*=\s*"([0-9.]+)"', manifest, re.MULTILINE)
    if not match:
        sys.exit("Cargo.toml: no rust-version in [workspace.package]")
    return match.group(1)


def main():
    top, crates = needed()
    text = ".".join(str(part) for part in top)
    print(f"the locked dependencies need Rust {text} (for {', '.join(crates)})")
    if "--check" in sys.argv[1:]:
        said = declared()
        if version(said) != top:
            sys.exit(f"Cargo.toml says rust-version = \"{said}\", but the lockfile needs {text}: change one of them")
        print(f"Cargo.toml says {said}: true")


if __name__ == "__main__":
    main()
