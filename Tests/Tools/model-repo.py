#!/usr/bin/env python3
"""Writes a model repository's files into a folder, for the `add` tests (stdlib only):
real safetensors files, a config.json, a sharded checkpoint's index, a GGUF file, the
README and .gitattributes a Hub repository has.

    model-repo.py OUT_DIR SPEC.json      (or the spec on stdin)

SPEC: {"files": {PATH: ENTRY, ...}, "index": "model.safetensors.index.json" (optional)}
ENTRY is one of
  {"tensors": [{"name", "dtype", "shape"}, ...], "metadata": {str: str} (optional),
   "pad": N (optional: spaces after the header JSON, as writers align it)}
      a safetensors file: the 8-byte little-endian header length N, N bytes of JSON
      (each tensor's dtype, shape and data_offsets, in the order given; `__metadata__`
      first when given), then each tensor's bytes (deterministic, from its name)
  {"json": VALUE}        the value as JSON text (a config.json)
  {"text": STR}          the text as UTF-8
  {"gguf": N}            a GGUF file of N bytes (magic, version 3, no tensors, then filler)
  {"raw_header": STR, "size": N}
                         a file that starts with the length of STR and STR itself, padded
                         with zeros to N bytes (a hostile header)
With "index", that file is written as a sharded checkpoint's index: `metadata.total_size`
and `weight_map` (every tensor of every *.safetensors file -> its file).

Prints one JSON object on stdout: {PATH: {"size", "sha256", "header_bytes", "data_bytes"}}.
"""
import hashlib, json, os, struct, sys

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64}


def tensor_bytes(name, count):
    """`count` bytes that depend only on the tensor's name."""
    out = bytearray()
    seed = hashlib.sha256(name.encode()).digest()
    while len(out) < count:
        seed = hashlib.sha256(seed).digest()
        out += seed
    return bytes(out[:count])


def safetensors(entry):
    header, blobs, offset = {}, [], 0
    if "metadata" in entry:
        header["__metadata__"] = entry["metadata"]
    for t in entry["tensors"]:
        elements = 1
        for d in t["shape"]:
            elements *= d
        size = (elements * BITS[t["dtype"]] + 7) // 8
        header[t["name"]] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + size]}
        blobs.append(tensor_bytes(t["name"], size))
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode() + b" " * entry.get("pad", 0)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs), len(text), offset


def main():
    out = sys.argv[1]
    spec = json.load(open(sys.argv[2]) if len(sys.argv) > 2 else sys.stdin)
    summary, weight_map = {}, {}
    for path, entry in spec["files"].items():
        header_bytes = data_bytes = None
        if "tensors" in entry:
            data, header_bytes, data_bytes = safetensors(entry)
            for t in entry["tensors"]:
                weight_map[t["name"]] = path
        elif "json" in entry:
            data = json.dumps(entry["json"], indent=2).encode()
        elif "text" in entry:
            data = entry["text"].encode()
        elif "gguf" in entry:
            head = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)
            data = head + tensor_bytes(path, entry["gguf"] - len(head))
        elif "raw_header" in entry:
            text = entry["raw_header"].encode()
            data = struct.pack("<Q", len(text)) + text
            data += b"\0" * max(0, entry["size"] - len(data))
        else:
            raise SystemExit("unknown entry for %s" % path)
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full) or out, exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        summary[path] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                         "header_bytes": header_bytes, "data_bytes": data_bytes}
    if spec.get("index"):
        total = sum(v["data_bytes"] or 0 for v in summary.values())
        data = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2).encode()
        with open(os.path.join(out, spec["index"]), "wb") as f:
            f.write(data)
        summary[spec["index"]] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                  "header_bytes": None, "data_bytes": None}
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main()
