"""What one `encode` call did to its inputs: the `EncodeReport` returned beside the states."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EncodeReport"]


@dataclass
class EncodeReport:
    """What happened to the inputs of one `encode` call."""

    n_inputs: int = 0
    max_length: int = 0
    policy: str = ""
    n_over_window: int = 0  # inputs longer than max_length
    n_tokens_cut: int = 0  # tokens dropped (middle_out / truncate)
    over_window: list = field(default_factory=list)  # their indices
    n_chunks: int = 0  # windows encoded (chunk policy), incl. single-window inputs
    n_cached: int = 0  # served from the disk cache
    longest: int = 0  # longest input in tokens

    def summary(self) -> str:
        """One line: how many inputs exceeded the window, the policy, tokens cut and windows encoded."""
        return (
            f"{self.n_over_window}/{self.n_inputs} inputs exceed {self.max_length} tokens "
            f"(longest {self.longest}); policy {self.policy!r}: {self.n_tokens_cut} tokens cut, "
            f"{self.n_chunks} windows encoded"
        )
