"""A fake draft for replay tests: fixed teacher-forced proposals (CachedLM.predictions' contract)."""


class FixedProposals:
    """A draft whose teacher-forced token at position i is ``proposals[i]``."""

    def __init__(self, proposals):
        self.proposals = proposals

    def predictions(self, seq):
        return [self.proposals[j + 1] for j in range(len(seq))]
