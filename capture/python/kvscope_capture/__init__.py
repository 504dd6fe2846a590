"""Record what a PyTorch causal LM's KV cache holds at every forward call, for
kvscope (`kvscope-cli check run.kvcapture`). Format: docs/capture-format.md.

    import kvscope_capture
    with kvscope_capture.Recorder("run.kvcapture") as rec:
        rec.watch(target, role="target")
        rec.watch(drafter, role="drafter")
        out = my_speculative_loop(...)
        rec.commit(out)
"""
from .errors import CaptureError
from .paged import PagedCache, PagedLayer, PagedSequence
from .recorder import Recorder
from .version import FORMAT_VERSION, __version__

__all__ = ["Recorder", "CaptureError", "PagedCache", "PagedSequence", "PagedLayer", "FORMAT_VERSION", "__version__"]
