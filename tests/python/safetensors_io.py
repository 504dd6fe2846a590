"""A safetensors reader for the tests, written independently of the recorder's
writer so that a capture's round trip checks the file, not the code against
itself."""
import json
import struct

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def read_header(path):
    """Returns (header dict, offset of the data section)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length).decode("utf-8"))
    return header, 8 + length


def read_tensors(path):
    """Returns (tensors by name, __metadata__ or {}). Checks that every tensor's
    byte range matches its dtype and shape and that ranges tile the data."""
    header, data_start = read_header(path)
    metadata = header.pop("__metadata__", {})
    with open(path, "rb") as f:
        f.seek(data_start)
        data = f.read()
    tensors = {}
    spans = []
    for name, entry in header.items():
        dtype = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        count = 1
        for dim in entry["shape"]:
            count *= dim
        if end - begin != count * torch.empty(0, dtype=dtype).element_size():
            raise ValueError(f"{name}: {end - begin} bytes for shape {entry['shape']}")
        chunk = bytearray(data[begin:end])
        flat = torch.frombuffer(chunk, dtype=dtype) if chunk else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"])
        spans.append((begin, end))
    spans.sort()
    position = 0
    for begin, end in spans:
        if begin != position:
            raise ValueError(f"data has a hole or overlap at byte {begin}")
        position = end
    if position != len(data):
        raise ValueError(f"data section is {len(data)} bytes, tensors cover {position}")
    return tensors, metadata
