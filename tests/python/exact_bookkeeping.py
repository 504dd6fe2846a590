"""The exact bookkeeping of docs/architecture.md ("Speculative rounds, exactly"
and "Rows are not positions") as a shadow a loop reports to, so that a buggy
loop can say where it first departed from it, in its own terms.

Every CacheSide that has a book reports each forward before it runs (the rows
its cache holds, as (token, rotary position) pairs, and the inputs with the
positions they are given); the loop reports the round's sequence x, the drafts
it verifies and each prune. A departure is recorded as {role, call, operation,
what}: `call` counts that role's forward calls from 0, and a departure between
calls carries the next call, the first to see the cache (as kvscope-cli check
names it). Departures are kept in the order they happened; `first` is the one
a root cause must name, the rest are its consequences.

The rules, for a round on x of L tokens:
* target: before each call its rows are exactly x[0:F] with F its frontier (0
  at the prefill, L-1 at a verify); the inputs follow at F, F+1, ... and are
  x[F..L-1] then the round's drafts; after a prune it holds exactly x'[0:L'-1]
  of the new sequence x';
* drafter: its rows are any prefix of x (Hugging Face's assistant is cropped
  to len-2 and fed two tokens), then its own drafts of this round; its inputs
  follow them, x's tokens below position L, anything (its drafts) above."""


ANY = "any"          # a new draft: any token
NOTHING = "nothing"  # past the end of what the round has


def describe(token):
    return {ANY: "a draft", NOTHING: "nothing"}.get(token, f"token {token}")


class ExactBookkeeping:
    def __init__(self):
        self.departures = []
        self.sequence = []
        self.round_length = 0
        self.drafts = []
        self.drafter_drafts = {}  # position -> the draft the drafter fed there this round
        self.started = set()  # roles that have made their first call

    @property
    def first(self):
        return self.departures[0] if self.departures else None

    def round_start(self, x):
        """A round (or the prefill) on the loop's sequence x begins."""
        self.sequence, self.round_length, self.drafts = list(x), len(x), []
        self.drafter_drafts = {}

    def drafted(self, drafts):
        """The drafts the target is about to verify."""
        self.drafts = list(drafts)

    def forward(self, side, tokens, positions):
        """Called by CacheSide.feed before the call runs."""
        role, call = side.role, side.calls
        rows = list(side.rows)
        wrong = self.wrong_rows(role, rows, self.target_frontier(role))
        if wrong:
            self.depart(role, call, "between", f"before {role} call {call} the cache holds {wrong}")
        for offset, (token, position) in enumerate(zip(tokens, positions)):
            expected_position = len(rows) + offset
            expected_token = self.token_at(role, expected_position, fed=True)
            if position != expected_position or expected_token not in (ANY, token):
                self.depart(role, call, "forward", f"{role} call {call} feeds token {token} at position {position} "
                            f"where {describe(expected_token)} belongs at {expected_position}")
                break
        if role == "drafter":
            self.drafter_drafts.update((p, t) for t, p in zip(tokens, positions) if p >= self.round_length)
        self.started.add(role)

    def pruned(self, x, *sides):
        """After a prune: each side given (the target, and the drafter when the
        loop prunes it here rather than before its next call) must hold a
        prefix of the new sequence x, the target exactly L'-1 rows."""
        self.round_start(x)
        for side in sides:
            frontier = len(x) - 1 if side.role == "target" else None
            wrong = self.wrong_rows(side.role, list(side.rows), frontier)
            if wrong:
                self.depart(side.role, side.calls, "between",
                            f"after the prune before {side.role} call {side.calls} the cache holds {wrong}")

    def target_frontier(self, role):
        if role != "target":
            return None
        return 0 if role not in self.started else self.round_length - 1

    def token_at(self, role, position, fed=False):
        """The token the exact bookkeeping puts at `position` this round: x's below
        L, then the target's drafts; for the drafter the drafts it has fed this
        round, and ANY for a new one it feeds (`fed`). NOTHING past the end."""
        if position < self.round_length:
            return self.sequence[position]
        if role == "drafter":
            return self.drafter_drafts.get(position, ANY if fed else NOTHING)
        index = position - self.round_length
        return self.drafts[index] if index < len(self.drafts) else NOTHING

    def wrong_rows(self, role, rows, frontier):
        """A sentence naming what is wrong with `rows`, or None."""
        if frontier is not None and len(rows) != frontier:
            return f"{len(rows)} rows where {frontier} are required"
        for index, row in enumerate(rows):
            if row is None:
                return f"an empty slot at row {index}"
            token, position = row
            expected = self.token_at(role, index)
            if position != index or expected != token:
                return f"row {index} = token {token} at position {position}, where {describe(expected)} belongs at {index}"
        return None

    def depart(self, role, call, operation, what):
        if any((d["role"], d["call"], d["operation"]) == (role, call, operation) for d in self.departures):
            return
        self.departures.append({"role": role, "call": call, "operation": operation, "what": what})
