__version__ = "0.1.0"
FORMAT_NAME = "kvscope-capture"
FORMAT_VERSION = 1
