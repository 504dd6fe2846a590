"""Paths and cached models of tests/fixtures for the Python tests."""
import functools
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
sys.path.insert(0, os.path.join(REPO, "capture", "python"))

from llama_ref import LlamaRef  # noqa: E402


@functools.lru_cache(maxsize=None)
def model(name):
    return LlamaRef(os.path.join(FIXTURES, "models", name))


@functools.lru_cache(maxsize=None)
def fixture_json(*parts):
    with open(os.path.join(FIXTURES, *parts)) as f:
        return json.load(f)


def pair_cases():
    """The llama-tiny + llama-tiny-draft greedy cases (prompt ids, 48 tokens, HF's rounds)."""
    return fixture_json("greedy", "llama-tiny+llama-tiny-draft.json")["cases"]


def window_cases():
    return fixture_json("greedy", "mistral-sw-tiny.json")["cases"]
