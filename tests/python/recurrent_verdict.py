"""The recurrent-state rule read off a capture's identities alone
(docs/capture-format-v3.md, "Recurrent state"), written from the spec for
the tests, sharing no code with the recorder: the rule `kvscope-cli check`
is to apply inside its one walker.

A call whose first input is at position p must resume, in every recurrent
layer and for every state kind, from the state computed after position p - 1
over the committed tokens 0 .. p - 1 (a call at position 0: from a state no
call computed, the initial one). A state's tokens are its provenance chain's:
the state `from` plus the inputs 0 .. `input` of the call that computed it.
The first call (in file order) that breaks it is named, with its layer and
state kind (conv before ssm) and what the state is: the state after which
position, and the call whose rejected drafts it holds."""
import json

from safetensors_io import read_header

KIND_ORDER = ("conv", "ssm")


def load_manifest(path):
    header, _ = read_header(path)
    return json.loads(header["__metadata__"]["kvscope_capture"])


class Provenance:
    def __init__(self, manifest, role):
        self.entries = {entry["id"]: entry for entry in manifest["recurrent_states"][role]}
        self.calls = {(call["role"], call["index"]): call for call in manifest["calls"]}
        self.role = role

    def tokens(self, state_id, sequence):
        """-> [(position, token, call)] the state was computed over, oldest first."""
        chain, seen = [], set()
        while state_id is not None and state_id not in seen:
            seen.add(state_id)
            entry = self.entries[state_id]
            if entry["call"] is None:
                break
            call = self.calls[(self.role, entry["call"])]
            fed = list(zip(call["positions"][sequence], call["input_ids"][sequence], [entry["call"]] * 10 ** 6))
            chain = fed[:entry["input"] + 1] + chain
            state_id = entry["from"]
        return chain


def first_breach(path, role="target"):
    """-> None, or {"sequence", "role", "call", "operation", "layer", "state", "state_after",
    "required_after", "rejected_drafts_of", "what"}."""
    manifest = load_manifest(path)
    provenance = Provenance(manifest, role)
    committed = manifest["committed"]
    for call in manifest["calls"]:
        recurrent = call.get("recurrent")
        if call["role"] != role or recurrent is None or recurrent["before"] is None:
            continue
        for sequence, entries in enumerate(recurrent["before"]):
            first = call["positions"][sequence][0]
            ordered = sorted(entries, key=lambda e: (e["layer"], KIND_ORDER.index(e["kind"])))
            for entry in ordered:
                breach = judge(provenance, committed[sequence], sequence, first, entry)
                if breach is not None:
                    breach.update({"sequence": sequence, "role": role, "call": call["index"],
                                   "operation": "restore", "layer": entry["layer"], "state": entry["kind"]})
                    breach["what"] = describe(breach)
                    return breach
    return None


def judge(provenance, committed, sequence, first, entry):
    state = provenance.entries[entry["id"]]
    required = first - 1
    after = state["after_position"]  # None: no recorded call computed it (the initial state, or one never seen)
    chain = provenance.tokens(entry["id"], sequence)
    foreign = [call for position, token, call in chain
               if position >= len(committed) or committed[position] != token]
    if (after == required or (after is None and required == -1)) and not foreign:
        return None
    return {"state_after": after, "required_after": required,
            "rejected_drafts_of": foreign[0] if foreign else None}


def describe(breach):
    what = f"{breach['role']} call {breach['call']} resumed from the {breach['state']} state of layer {breach['layer']} "
    what += ("that no recorded call computed" if breach["state_after"] is None
             else f"after position {breach['state_after']}")
    if breach["rejected_drafts_of"] is not None:
        what += f" (it includes the rejected drafts of {breach['role']} call {breach['rejected_drafts_of']})"
    return what + f" where the state after position {breach['required_after']} was required"
