__version__ = "0.2.0"
FORMAT_NAME = "kvscope-capture"
SINGLE_FORMAT_VERSION = 1  # a batch of one sequence: written as version 1, unchanged
BATCH_FORMAT_VERSION = 2   # a batch of B > 1 sequences (docs/capture-format-v2.md)
EXTENDED_FORMAT_VERSION = 3  # version 2's layout plus optional fields (docs/capture-format-v3.md)
FORMAT_VERSION = EXTENDED_FORMAT_VERSION  # the newest version the recorder writes
