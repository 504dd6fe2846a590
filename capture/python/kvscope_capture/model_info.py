"""What a capture says about each model, so a reader can tell whether a
checkpoint is the one the engine ran: a config subset and a weights
fingerprint of the input embedding matrix."""
import weakref

import torch

CONFIG_FIELDS = ("model_type", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "head_dim", "hidden_size", "vocab_size", "sliding_window")


def config_of(module):
    return getattr(module, "config", None)


def config_value(config, name):
    if config is None:
        return None
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def sliding_layers(config, num_layers):
    """Per-layer sliding-window flags as the config states them, or None:
    `layer_types` ("sliding_attention"), Gemma 2's even layers, or every layer
    when `sliding_window` is set and not switched off by `use_sliding_window`."""
    if num_layers is None or config_value(config, "sliding_window") is None:
        return None
    layer_types = config_value(config, "layer_types")
    if layer_types:
        return [kind == "sliding_attention" for kind in layer_types]
    if config_value(config, "model_type") == "gemma2":
        return [layer % 2 == 0 for layer in range(num_layers)]
    if config_value(config, "use_sliding_window") is False:
        return None
    return [True] * num_layers


def config_subset(module):
    config = config_of(module)
    subset = {name: config_value(config, name) for name in CONFIG_FIELDS}
    if subset["head_dim"] is None and subset["hidden_size"] and subset["num_attention_heads"]:
        subset["head_dim"] = subset["hidden_size"] // subset["num_attention_heads"]
    if subset["num_key_value_heads"] is None:
        subset["num_key_value_heads"] = subset["num_attention_heads"]
    subset["sliding_layers"] = sliding_layers(config, subset["num_hidden_layers"])
    return subset


def name_or_path(module):
    config = config_of(module)
    return config_value(config, "name_or_path") or config_value(config, "_name_or_path") or type(module).__name__


def input_embedding(module):
    """The input embedding matrix [vocab, hidden], or None."""
    if hasattr(module, "get_input_embeddings"):
        embedding = module.get_input_embeddings()
        weight = getattr(embedding, "weight", None)
        if isinstance(weight, torch.Tensor):
            return weight
    for name, parameter in module.named_parameters():
        if name.endswith(("embed_tokens.weight", "wte.weight", "word_embeddings.weight")):
            return parameter
    return None


# Elements of the embedding widened to float64 at a time: the whole matrix
# widened at once took 2.4x its float32 size (the copy and its squares: 2.2 GB
# for the 0.5 B shape's 152k x 896), for sums that need one block at a time.
FINGERPRINT_BLOCK_ELEMENTS = 1 << 22


# The fingerprints already taken, by id of the embedding tensor (dropped when
# it is freed): a process that records several runs of one model (a
# benchmark's trials, a plain and a speculative run) reads its embedding once.
# A tensor written in place since (load_state_dict, copy_) has another version
# and is read again; an inference tensor has no version and is read every time.
_fingerprints = {}


def forget_fingerprints():
    """Drops the fingerprints taken (a benchmark timing a first recording)."""
    _fingerprints.clear()


def fingerprint_key(weight):
    """What must be unchanged for a fingerprint taken before to hold, or None."""
    try:
        version = weight._version
    except (AttributeError, RuntimeError):  # inference tensors keep no version counter
        return None
    return version, weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()), weight.dtype


def fingerprint_sums(weight):
    """(sum, sum of squares) over every element taken as its float32 value,
    accumulated in float64, one block of elements at a time."""
    total = squares = 0.0
    for block in weight.detach().reshape(-1).split(FINGERPRINT_BLOCK_ELEMENTS):
        wide = block.float().double()  # [block]
        total += float(wide.sum())
        squares += float(wide.square().sum())  # not torch.dot: OpenBLAS threads of its own spin against torch's
    return total, squares


def weights_fingerprint(module):
    """{"tensor": "input_embeddings", "shape", "sum", "sum_squares"}: the sums over
    every element of the matrix taken as float32 values, accumulated in float64."""
    weight = input_embedding(module)
    if weight is None:
        return None
    key = fingerprint_key(weight)
    known = _fingerprints.get(id(weight))
    if key is None or known is None or known[0] != key:
        with torch.no_grad():
            known = (key, fingerprint_sums(weight))
        if key is not None:
            if id(weight) not in _fingerprints:
                weakref.finalize(weight, _fingerprints.pop, id(weight), None)
            _fingerprints[id(weight)] = known
    total, squares = known[1]
    return {"tensor": "input_embeddings", "shape": list(weight.shape), "sum": total, "sum_squares": squares}


def describe_model(module):
    return {"name_or_path": str(name_or_path(module)), "config": config_subset(module),
            "fingerprint": weights_fingerprint(module)}
