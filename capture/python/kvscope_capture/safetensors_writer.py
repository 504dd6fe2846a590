"""Writes a safetensors file (https://github.com/huggingface/safetensors):
8-byte little-endian header length, a JSON header padded with spaces to a
multiple of 8, then each tensor's raw little-endian bytes, in header order,
back to back."""
import ctypes
import json
import os
import struct
import sys

import torch

DTYPE_NAMES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL", torch.uint8: "U8",
}


def tensor_bytes(tensor):
    """The raw bytes of a CPU tensor, row-major."""
    tensor = tensor.detach().cpu().contiguous()
    nbytes = tensor.numel() * tensor.element_size()
    return ctypes.string_at(tensor.data_ptr(), nbytes) if nbytes else b""


def write_safetensors(path, tensors, metadata):
    """tensors: name -> tensor (written in this order); metadata: str -> str.
    Written to a temporary file first, so a failure never leaves half a file."""
    if sys.byteorder != "little":
        raise RuntimeError("safetensors data is little-endian; this host is not")
    header = {"__metadata__": metadata}
    offset = 0
    for name, tensor in tensors.items():
        if tensor.dtype not in DTYPE_NAMES:
            raise TypeError(f"tensor {name}: dtype {tensor.dtype} cannot be written")
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    temporary = f"{path}.partial"
    with open(temporary, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for tensor in tensors.values():
            f.write(tensor_bytes(tensor))
    os.replace(temporary, path)
    return 8 + len(encoded) + offset
