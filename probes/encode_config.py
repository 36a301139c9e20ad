"""The settings of hidden-state extraction (`probes.extract.encode` / `encode_ids`), in one frozen config.

Kept apart from `probes.extract` so that validating settings (e.g. a CLI's) does not import JAX.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from puaudit_runtime.checks import check_choice, check_flag, check_int, check_range, is_int

__all__ = ["EncodeConfig"]

POOLINGS = ("last", "mean", "cls")
LONG_INPUTS = ("chunk", "middle_out", "truncate", "error")
PADDING_SIDES = ("right", "left")


@dataclass(frozen=True)
class EncodeConfig:
    """How `probes.extract.encode` / `encode_ids` turn inputs into pooled hidden states.

    Every extraction setting lives here with its one default; what a call runs on (the model, the
    inputs, a disk cache folder, a device mesh) is passed beside it. Values are checked when the
    config is made (ValueError naming the field; NumPy numbers become Python ones); what depends
    on the model (the layer range, `max_length` within its window, "chunk" for encoders only) is
    checked in `encode_ids`.

    Attributes:
        layers: hidden state(s) returned, HF's `hidden_states` numbering (0 = embeddings, -1 = the
            final, normed state of a decoder). An int gives rows (d,); a sequence of ints (stored as
            a tuple) gives rows (len(layers), d).
        pooling: "last" (the last real token whatever the padding side), "mean" or "cls"; None: the
            model's own (last token for decoders, the encoder's configured pooling, e.g. mean for
            MiniLM).
        batch_size: inputs padded to one length bucket and run together (rows per forward, >= 1).
        max_length: the token cap per input (>= 1), or None: the model window (at most
            `probes.extract.DECODER_MAX_LENGTH` tokens for decoders).
        long_inputs: the policy for inputs longer than `max_length`: "chunk" (overlapping windows,
            averaged weighted by tokens; encoders only), "middle_out" (keep the first
            `head_fraction` and the end), "truncate" (keep the beginning) or "error"; None: "chunk"
            for encoders, "middle_out" for decoders.
        head_fraction: the share of `max_length` kept from the start under "middle_out" (0 to 1;
            the rest is kept from the end).
        chunk_overlap: tokens shared by neighbouring windows under "chunk" (>= 0), or None: a
            quarter of the window.
        padding_side: "right" or "left" (the pooled states agree to float rounding either way).
        normalised: scale every output vector to unit L2 norm (sentence-transformers' Normalize).
        micro_batch_tokens: tokens per micro-batch inside each jitted batch: "auto" (1,024 on CPU,
            the whole batch on GPU/TPU; `probes.extract.resolve_micro_batch_tokens`), an int >= 1,
            or None (one pass). Results agree to float rounding whatever the split.
        progress: show a progress bar (tqdm, on stderr) counting the inputs, moving after every batch.
        cache_every: with a disk cache, new inputs encoded between two cache shards (>= 1): an
            interrupted run keeps what it wrote.
    """

    ROW_NEUTRAL = ("batch_size", "padding_side", "micro_batch_tokens", "progress", "cache_every")
    """The settings that change no output row beyond float rounding (or only speed and display):
    the disk cache's key leaves them out; every other field is keyed (`cache_settings`)."""

    layers: int | tuple[int, ...] = -1
    pooling: str | None = field(default=None, metadata={"choices": POOLINGS})
    batch_size: int = 16
    max_length: int | None = None
    long_inputs: str | None = field(default=None, metadata={"choices": LONG_INPUTS})
    head_fraction: float = 0.25
    chunk_overlap: int | None = None
    padding_side: str = field(default="right", metadata={"choices": PADDING_SIDES})
    normalised: bool = False
    micro_batch_tokens: int | str | None = "auto"
    progress: bool = False
    cache_every: int = 512

    def __post_init__(self):
        plain = dict(
            batch_size=check_int("batch_size", self.batch_size, 1),
            max_length=check_int("max_length", self.max_length, 1, optional=True),
            chunk_overlap=check_int("chunk_overlap", self.chunk_overlap, 0, optional=True),
            cache_every=check_int("cache_every", self.cache_every, 1),
        )
        if self.micro_batch_tokens != "auto":
            plain["micro_batch_tokens"] = check_int("micro_batch_tokens", self.micro_batch_tokens, 1, optional=True,
                                                    need="be 'auto', None or an integer >= 1")  # fmt: skip
        f = self.head_fraction
        check_range("head_fraction", f, 0, 1, "[]")
        plain["head_fraction"] = f if type(f) in (int, float) else float(f)  # a Python number keys the cache as before
        for name, value in dict(plain, layers=_checked_layers(self.layers)).items():
            object.__setattr__(self, name, value)
        check_choice("pooling", self.pooling, POOLINGS, optional=True)
        check_choice("long_inputs", self.long_inputs, LONG_INPUTS, optional=True)
        check_choice("padding_side", self.padding_side, PADDING_SIDES)
        for name in ("normalised", "progress"):
            object.__setattr__(self, name, check_flag(name, getattr(self, name)))  # NumPy's bool as Python's

    def cache_settings(self) -> dict:
        """The settings that change the vectors, as the disk cache keys them (JSON-able).

        Every field but those of `ROW_NEUTRAL` (batch size, padding side, micro-batches, progress and
        cache shard size change nothing but float rounding or speed, so they share cached rows);
        `tests/probes/test_cache_key.py` fails when a field is in neither. The key "normalize" is the
        name the cache was first written under. `probes.extract.cache_namespace` adds the model and
        the resolved long-input rule.
        """
        return dict(
            layers=self.layers if isinstance(self.layers, int) else list(self.layers),
            pooling=self.pooling,
            max_length=self.max_length,
            long_inputs=self.long_inputs,
            head_fraction=self.head_fraction,
            chunk_overlap=self.chunk_overlap,
            normalize=self.normalised,
        )


def _checked_layers(layers) -> int | tuple[int, ...]:
    """An int as a plain int, a sequence of ints as a tuple; ValueError otherwise (range: per model)."""
    if is_int(layers):
        return int(layers)
    seq = tuple(layers) if hasattr(layers, "__iter__") and not isinstance(layers, (str, bytes, dict)) else ()
    if not seq or not all(is_int(x) for x in seq):
        raise ValueError(f"layers must be an int or a non-empty sequence of ints, got {layers!r}")
    return tuple(int(x) for x in seq)
