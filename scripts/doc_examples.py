#!/usr/bin/env python3
"""Lists the public items of the troupe crate whose documentation has no example.

Reads rustdoc's JSON output, which needs a nightly toolchain:

    cargo +nightly rustdoc -p troupe -- -Z unstable-options --output-format json
    python3 scripts/doc_examples.py            # exits 1 if an item lacks an example

Enum variants and struct fields are covered by their type's example.
"""
import json
import pathlib
import sys

doc = json.loads(pathlib.Path("target/doc/troupe.json").read_text())
index = doc["index"]
seen = set()
missing = []
total = 0


def walk(item_id, path, in_trait=False):
    global total
    if item_id in seen or str(item_id) not in index:
        return
    seen.add(item_id)
    item = index[str(item_id)]
    if item.get("crate_id") != 0:
        return
    kind = next(iter(item["inner"]))
    inner = item["inner"][kind]
    name = item.get("name") or ""
    here = (f"{path}::{name}" if path else name) if name else path
    if kind not in ("impl", "use", "variant", "struct_field", "module") and (item.get("visibility") == "public" or in_trait):
        total += 1
        if "```" not in (item.get("docs") or ""):
            missing.append(f"{kind} {here}")
    if kind == "module":
        for child in inner["items"]:
            walk(child, here)
    elif kind == "use" and inner.get("id") is not None:
        walk(inner["id"], path)
    elif kind in ("struct", "enum", "union"):
        for impl_id in inner.get("impls", []):
            impl = index.get(str(impl_id))
            if impl and impl["inner"]["impl"].get("trait") is None:
                for child in impl["inner"]["impl"]["items"]:
                    walk(child, here)
    elif kind == "trait":
        for child in inner["items"]:
            walk(child, here, in_trait=True)


walk(doc["root"], "")
for line in missing:
    print(line)
print(f"{total - len(missing)} of {total} public items have an example")
sys.exit(1 if missing else 0)
