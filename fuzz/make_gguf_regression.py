#!/usr/bin/env python3
"""Writes the hand-made hostile GGUF files of fuzz/regression/gguf/.

Each file is a small valid GGUF (the layout kvscope's exporter writes:
core/gguf/gguf_file.h) with one thing wrong: the header, a count, a length,
a value type, a tensor info, the placement of the data, the vocabulary, or the
file cut at a section boundary. Deterministic: running it again rewrites the
same bytes. tests/core/base/hostile_gguf_test.cpp names the error each file
must be refused with; ctest's fuzz_regression_gguf replays them.

Usage: /usr/bin/python3 fuzz/make_gguf_regression.py [OUT_DIR]
"""
import os
import struct
import sys

# Metadata value types, as GGUF numbers them.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
TYPE_SIZE = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def gstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return u64(len(b)) + b


def element(t, v):
    return gstr(v) if t == STRING else struct.pack(SCALAR[t], v)


def value(t, v):
    """A scalar (t, v) or an array (ARRAY, (element type, [values]))."""
    if t != ARRAY:
        return u32(t) + element(t, v)
    et, items = v
    return u32(ARRAY) + u32(et) + u64(len(items)) + b"".join(element(et, x) for x in items)


def tensor_data(ggml_type, count, seed):
    if ggml_type == GGML_F32:
        return b"".join(struct.pack("<f", 0.25 * (i + seed)) for i in range(count))
    if ggml_type == GGML_F16:
        return b"".join(struct.pack("<e", 0.5 * (i - seed)) for i in range(count))
    return b"".join(struct.pack("<f", float(i + seed))[2:] for i in range(count))  # bf16: the high half (exact below 256)


class Gguf:
    """A small valid GGUF v3; every field can be changed before bytes()."""

    def __init__(self):
        self.magic = b"GGUF"
        self.version = 3
        self.alignment = 32
        self.kv = [("general.architecture", STRING, "llama"),
                   ("general.alignment", U32, 32),
                   ("tokenizer.ggml.model", STRING, "gpt2"),
                   ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "ab", "<|bos|>"])),
                   ("tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 1, 3])),
                   ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"])),
                   ("tokenizer.ggml.bos_token_id", U32, 3)]
        # name, ggml type, ne (ggml order), offset (None: laid out in order)
        self.tensors = [["token_embd.weight", GGML_F32, [4, 4], None],
                        ["output_norm.weight", GGML_F16, [4], None],
                        ["blk.0.attn_q.weight", GGML_BF16, [4, 4], None]]
        self.n_tensors = None  # None: the real counts
        self.n_kv = None
        self.raw_kv = None  # bytes replacing the metadata section
        self.raw_infos = None  # bytes replacing the tensor infos

    def offsets(self):
        """(the offsets the infos state, where the data is laid out: in order)."""
        stated, natural, at = [], [], 0
        for name, t, ne, off in self.tensors:
            n = TYPE_SIZE.get(t, 4)
            for d in ne:
                n *= d
            n = n if n <= 4 * 4096 else 0  # a hostile shape takes no room (its data is not written)
            stated.append(at if off is None else off)
            natural.append(at)
            at = (at + n + self.alignment - 1) // self.alignment * self.alignment
        return stated, natural

    def sections(self):
        """The file as (section name, bytes) in order."""
        head = self.magic + u32(self.version)
        counts = u64(len(self.tensors) if self.n_tensors is None else self.n_tensors) + \
            u64(len(self.kv) if self.n_kv is None else self.n_kv)
        kv = self.raw_kv if self.raw_kv is not None else b"".join(gstr(k) + value(t, v) for k, t, v in self.kv)
        offsets, natural = self.offsets()
        infos = self.raw_infos if self.raw_infos is not None else b"".join(
            gstr(name) + u32(len(ne)) + b"".join(u64(d) for d in ne) + u32(t) + u64(off)
            for (name, t, ne, _), off in zip(self.tensors, offsets))
        before = len(head) + len(counts) + len(kv) + len(infos)
        pad = b"\0" * (-before % self.alignment)
        data = b""
        for (name, t, ne, _), off in zip(self.tensors, natural):
            count = 1
            for d in ne:
                count *= d
            if count > 4096:
                continue  # the hostile shapes: no data
            data = data.ljust(off, b"\0") + tensor_data(t, count, len(data))
        data = data.ljust(-(-len(data) // self.alignment) * self.alignment, b"\0")
        return [("magic_version", head), ("counts", counts), ("metadata", kv), ("tensor_infos", infos),
                ("padding", pad), ("data", data)]

    def bytes(self):
        return b"".join(b for _, b in self.sections())


def replace_kv(g, key, t, v):
    g.kv = [(k, t, v) if k == key else (k, kt, kv) for k, kt, kv in g.kv]
    return g


def drop_kv(g, key):
    g.kv = [e for e in g.kv if e[0] != key]
    return g


def edit(fn):
    g = Gguf()
    fn(g)
    return g.bytes()


def cases():
    out = {"valid_small.gguf": Gguf().bytes()}
    # header
    out["bad_magic.gguf"] = edit(lambda g: setattr(g, "magic", b"GGML"))
    for name, v in [("0", 0), ("4", 4), ("huge", 0xFFFFFFFF)]:
        out["version_%s.gguf" % name] = edit(lambda g, v=v: setattr(g, "version", v))
    out["tensor_count_2p63.gguf"] = edit(lambda g: setattr(g, "n_tensors", 1 << 63))
    out["kv_count_2p63.gguf"] = edit(lambda g: setattr(g, "n_kv", 1 << 63))
    out["tensor_count_past_metadata.gguf"] = edit(lambda g: setattr(g, "n_tensors", 20))
    # lengths
    out["key_length_past_end.gguf"] = edit(lambda g: setattr(g, "raw_kv", u64(1000) + b"general.architecture"))
    out["key_length_2p62.gguf"] = edit(lambda g: setattr(g, "raw_kv", u64(1 << 62) + b"x"))
    out["string_value_past_end.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("general.architecture") + u32(STRING) + u64(5000) + b"llama"))
    out["string_value_2p62.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("general.architecture") + u32(STRING) + u64(1 << 62) + b"llama"))
    out["tensor_name_length_2p62.gguf"] = edit(lambda g: setattr(g, "raw_infos", u64(1 << 62) + b"token_embd.weight"))
    out["array_2p40_u8.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("tokenizer.ggml.token_type") + u32(ARRAY) + u32(U8) + u64(1 << 40) + b"\1" * 64))
    out["array_2p40_strings.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("tokenizer.ggml.tokens") + u32(ARRAY) + u32(STRING) + u64(1 << 40) + gstr("a")))
    # value types
    out["nested_array.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("general.nested") + u32(ARRAY) + u32(ARRAY) + u64(1) + u32(U8) + u64(1) + b"\0"))
    out["unknown_value_type_13.gguf"] = edit(lambda g: setattr(g, "raw_kv", gstr("general.x") + u32(13) + u32(0)))
    out["unknown_value_type_huge.gguf"] = edit(lambda g: setattr(g, "raw_kv", gstr("general.x") + u32(0xFFFFFFFF) + u32(0)))
    out["unknown_array_element_type.gguf"] = edit(lambda g: setattr(
        g, "raw_kv", gstr("general.x") + u32(ARRAY) + u32(77) + u64(1) + u32(0)))
    out["bool_value_2.gguf"] = edit(lambda g: g.kv.append(("general.flag", BOOL, 2)))
    out["u64_value_2p63.gguf"] = edit(lambda g: g.kv.append(("general.size", U64, 1 << 63)))
    # tensor infos
    out["tensor_offset_past_file.gguf"] = edit(lambda g: g.tensors[2].__setitem__(3, 1 << 20))
    out["tensor_offset_2p64_minus_32.gguf"] = edit(lambda g: g.tensors[2].__setitem__(3, (1 << 64) - 32))
    out["tensors_overlapping.gguf"] = edit(lambda g: g.tensors[1].__setitem__(3, 32))
    out["tensor_offset_unaligned.gguf"] = edit(lambda g: g.tensors[1].__setitem__(3, 65))
    out["dim_zero.gguf"] = edit(lambda g: g.tensors[0].__setitem__(2, [4, 0]))
    out["dims_product_overflow.gguf"] = edit(lambda g: g.tensors[0].__setitem__(2, [1 << 32, 1 << 32, 1 << 32]))
    out["dims_product_2p64_wraps_to_small.gguf"] = edit(lambda g: g.tensors[0].__setitem__(2, [1 << 32, 1 << 32, 1, 1]))
    out["dim_2p63.gguf"] = edit(lambda g: g.tensors[0].__setitem__(2, [1 << 63]))
    out["n_dims_5.gguf"] = edit(lambda g: g.tensors[0].__setitem__(2, [1, 1, 1, 1, 16]))
    out["n_dims_0.gguf"] = edit(lambda g: g.tensors[1].__setitem__(2, []))
    out["n_dims_huge.gguf"] = edit(lambda g: setattr(g, "raw_infos", gstr("t") + u32(0xFFFFFFFF) + u64(1) * 8))
    out["ggml_type_unknown.gguf"] = edit(lambda g: g.tensors[0].__setitem__(1, 99))
    out["ggml_type_quantized_q4_0.gguf"] = edit(lambda g: g.tensors[0].__setitem__(1, 2))
    out["tensor_name_empty.gguf"] = edit(lambda g: g.tensors[0].__setitem__(0, ""))
    out["tensor_name_100_bytes.gguf"] = edit(lambda g: g.tensors[0].__setitem__(0, "blk." + "x" * 96))
    # duplicates
    out["duplicate_key.gguf"] = edit(lambda g: g.kv.append(("general.architecture", STRING, "gpt2")))
    out["duplicate_tensor_name.gguf"] = edit(lambda g: g.tensors[2].__setitem__(0, "token_embd.weight"))
    # alignment
    out["alignment_0.gguf"] = edit(lambda g: replace_kv(g, "general.alignment", U32, 0))
    out["alignment_3.gguf"] = edit(lambda g: replace_kv(g, "general.alignment", U32, 3))
    out["alignment_as_string.gguf"] = edit(lambda g: replace_kv(g, "general.alignment", STRING, "32"))
    out["alignment_as_array.gguf"] = edit(lambda g: replace_kv(g, "general.alignment", ARRAY, (U32, [32])))
    # truncated at every section boundary, and inside the metadata and the data
    whole = Gguf()
    at = 0
    for name, chunk in whole.sections():
        if at > 0:
            out["truncated_before_%s.gguf" % name] = whole.bytes()[:at]
        if name in ("metadata", "data") and chunk:
            out["truncated_inside_%s.gguf" % name] = whole.bytes()[:at + len(chunk) // 2]
        if name == "tensor_infos":  # inside the last info: the count still fits the bytes left
            out["truncated_inside_tensor_infos.gguf"] = whole.bytes()[:at + len(chunk) - 4]
        at += len(chunk)
    out["truncated_one_byte_short.gguf"] = whole.bytes()[:-1]
    out["empty.gguf"] = b""
    # the vocabulary
    out["vocab_token_type_length_mismatch.gguf"] = edit(
        lambda g: replace_kv(g, "tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 1])))
    out["vocab_scores_length_mismatch.gguf"] = edit(
        lambda g: g.kv.append(("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * 7))))
    out["vocab_scores_as_strings.gguf"] = edit(
        lambda g: g.kv.append(("tokenizer.ggml.scores", ARRAY, (STRING, ["0", "0", "0", "0"]))))
    out["vocab_tokens_not_strings.gguf"] = edit(
        lambda g: replace_kv(g, "tokenizer.ggml.tokens", ARRAY, (I32, [1, 2, 3, 4])))
    out["vocab_tokens_empty.gguf"] = edit(lambda g: replace_kv(g, "tokenizer.ggml.tokens", ARRAY, (STRING, [])))
    out["vocab_token_type_7.gguf"] = edit(
        lambda g: replace_kv(g, "tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 7, 3])))
    out["vocab_bos_outside.gguf"] = edit(lambda g: replace_kv(g, "tokenizer.ggml.bos_token_id", U32, 4))
    out["vocab_eos_as_string.gguf"] = edit(lambda g: g.kv.append(("tokenizer.ggml.eos_token_id", STRING, "3")))
    out["vocab_merge_without_space.gguf"] = edit(
        lambda g: replace_kv(g, "tokenizer.ggml.merges", ARRAY, (STRING, ["ab"])))
    out["vocab_scores_without_tokens.gguf"] = edit(lambda g: (
        [drop_kv(g, k) for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                 "tokenizer.ggml.bos_token_id")],
        g.kv.append(("tokenizer.ggml.scores", ARRAY, (F32, [0.0])))))
    out["vocab_bos_without_tokens.gguf"] = edit(lambda g: [
        drop_kv(g, k) for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges")])
    out["vocab_model_as_array.gguf"] = edit(lambda g: replace_kv(g, "tokenizer.ggml.model", ARRAY, (STRING, ["gpt2"])))
    # text that reaches a terminal or a dialog: accepted (token texts may hold
    # anything) and shown escaped; names in errors are escaped too
    markup = ["<img src=\"/dev/zero\">", "\x1b[5m\x1b[31mblink\x1b[0m", "<a href=\"http://x\">x</a>\r\x07", "\xe2\x80\xae"]
    out["token_text_markup_and_escapes.gguf"] = edit(lambda g: (
        replace_kv(g, "tokenizer.ggml.tokens", ARRAY, (STRING, markup)),
        replace_kv(g, "general.architecture", STRING, "<h1>llama</h1>\x1b]0;title\x07")))
    out["duplicate_key_with_escapes.gguf"] = edit(lambda g: (
        g.kv.append(("\x1b[5mgeneral.x\x1b[0m", U8, 1)), g.kv.append(("\x1b[5mgeneral.x\x1b[0m", U8, 2))))
    out["tensor_name_with_escapes_quantized.gguf"] = edit(lambda g: (
        g.tensors[0].__setitem__(0, "\x1b[2J\x1b[31mred"), g.tensors[0].__setitem__(1, 8)))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "regression", "gguf")
    os.makedirs(out_dir, exist_ok=True)
    files = cases()
    for name, data in sorted(files.items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), out_dir))


if __name__ == "__main__":
    main()
