"""BoRP: bootstrapped regression probing (BoRP, §3, §5, Appendix E).

Pipeline, top to bottom:

1. Prompts. A dialogue (chat messages, the rated response last) is the shared prefix; a probe is a
   pair of suffix prompts: the same user instruction followed by a positive or a negative verdict
   ("Performance is Excellent" / "Performance is Terrible", the paper's generic wording, §3.2 Phase 1).
   `blind_probe()` is the generic blind prompt, `rubric_probe(criterion, rubric)` adds a
   behaviour-oriented rubric to the instruction (§3.3 "Refined Extraction"); the verdicts are the
   same, so blind vs rubric differ only in the instruction.
2. Extraction (`contrastive_vectors`): v = h(prefix + positive) - h(prefix + negative), the hidden
   state of the final token at any set of layers; the prefix's KV cache is computed once per dialogue
   and shared by all 2 x n_probes suffixes (`probes.extract.encode_with_shared_prefix`, §3.4);
   `reuse_prefix=False` recomputes prefix + suffix for every suffix (same token ids, same result)
   for the throughput comparison. `compress_middle_out` drops middle turns of long histories (§3.4).
3. Geometry (§3.2 Phase 2, Figure 2): intensity ||v||_2, outlierness D = ||v - c||_1 (Manhattan
   distance to the centroid c of a reference set). `polarization_index` fuses them (below);
   `mine_polarized` returns the top / bottom PI items for rubric bootstrapping.
4. Features [v, ||v||_2, D] (Appendix E: d + 2 columns) -> PLS head (`probes.pls`, scale=True) ->
   prediction clipped to the rubric's scale (`BorpHead`). `reducer="pca"` is the paper's ablation
   (principal components of the same standardised features + least squares).
5. Geometric resampling (`density_resample`, §3.3): resample the training set with probability
   proportional to 1 / density(D)^power (histogram density of D, ratio clipped): the dense centre is
   down-sampled, the sparse tails up-sampled. Any 1-d array can drive it (e.g. the training labels).
6. Layer-wise uncertainty (`LayerwiseHeads`, §3.3 / §5.2): heads on an intermediate and the final
   layer; ``U = |y_final - y_mid|``.
7. Rubric bootstrapping (`bootstrap_rubric`, §3.2 Phase 3): the mined extremes go to a generator
   callable `generate(prompt) -> text` (a teacher LLM client; `probes` never imports puaudit_jax)
   with a reverse-engineering prompt per draft (ensemble over disjoint subsets), then a fusion prompt.

Polarization index (the paper's Eq. 2 is lost in extraction; this is our definition). With a
reference set (the training items) giving median m_N and median absolute deviation s_N of ||v||
and the empirical CDF F_D of D::

    PI(v) = z(v) * (1 + F_D(D(v))),     z(v) = (||v||_2 - m_N) / (1.4826 s_N).

The sign and the first-order size come from intensity (the paper's Figure 2a: ||v|| grows with the
score, so z < 0 for bad and z > 0 for good items); outlierness (Figure 2b: D is U-shaped in the score,
large at both extremes) multiplies ``|z|`` by a factor between 1 and 2, so items that are both intense
and outlying move furthest into the tails while central items (small D) stay near 0. Rank-based
F_D and the robust z make PI free of the units of v. `orientation=-1` flips the sign for a model
whose ||v|| falls with the score (check it on a few labels; the experiment reports it).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from probes.pls import PLSRegression

__all__ = [
    "ProbePrompt",
    "blind_probe",
    "rubric_probe",
    "render_prefix",
    "render_suffix",
    "compress_middle_out",
    "contrastive_vectors",
    "ExtractionStats",
    "intensity",
    "outlierness",
    "polarization_index",
    "mine_polarized",
    "density_resample",
    "geometric_features",
    "HeadConfig",
    "BorpHead",
    "LayerwiseHeads",
    "grouped_kfold",
    "cross_val_predict",
    "agreement",
    "REVERSE_PROMPT",
    "FUSION_PROMPT",
    "bootstrap_rubric",
    "BootstrappedRubric",
    "parse_rubric",
]


# ---------------------------------------------------------------------------------------------
# 1. Prompts


POSITIVE_VERDICT = "Performance is Excellent"
NEGATIVE_VERDICT = "Performance is Terrible"
BLIND_INSTRUCTION = "Evaluate the assistant's performance in the conversation above."
RUBRIC_INSTRUCTION = (
    "Evaluate the assistant's last response in the conversation above on {criterion}, "
    "using this rubric (score: behaviour):\n{rubric}\nThen give your verdict."
)


@dataclass(frozen=True)
class ProbePrompt:
    """A contrastive probe: one user instruction, a positive and a negative verdict.

    scale: (low, high) of the rubric's scores (predictions are clipped to it).
    """

    name: str
    instruction: str
    positive: str = POSITIVE_VERDICT
    negative: str = NEGATIVE_VERDICT
    scale: tuple[float, float] = (1.0, 5.0)


def blind_probe(scale=(1.0, 5.0)) -> ProbePrompt:
    """The generic blind-probe prompt (PUAudit §3.2 Phase 1: "Performance is Excellent/Terrible")."""
    return ProbePrompt("blind", BLIND_INSTRUCTION, scale=tuple(map(float, scale)))


def rubric_probe(criterion: str, rubric: str | dict, scale=(1.0, 5.0), name: str | None = None) -> ProbePrompt:
    """A rubric prompt: `rubric` is text or {score: description} (written highest score first)."""
    if isinstance(rubric, dict):
        rubric = "\n".join(f"{k}: {v}" for k, v in sorted(rubric.items(), key=lambda kv: -float(kv[0])))
    return ProbePrompt(
        name or f"rubric:{criterion}",
        RUBRIC_INSTRUCTION.format(criterion=criterion, rubric=rubric),
        scale=tuple(map(float, scale)),
    )


def _has_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prefix(tokenizer, messages: Sequence[dict]) -> str:
    """The dialogue rendered as text (no generation prompt).

    With the model's chat template, or as PUAudit-style ``"<|role|>content"`` segments for tokenizers without a
    template.
    """
    if _has_template(tokenizer):
        return tokenizer.apply_chat_template(list(messages), add_generation_prompt=False)
    return "".join(f"<|{m['role']}|>{m['content']}" for m in messages)


def render_suffix(tokenizer, messages: Sequence[dict], instruction: str, verdict: str) -> str:
    """Text that continues `render_prefix(messages)` with the instruction and the verdict.

    The instruction is a user turn and the verdict the start of the assistant turn (no end-of-turn token:
    the verdict's last token is the probed position).
    """
    if _has_template(tokenizer):
        prefix = tokenizer.apply_chat_template(list(messages), add_generation_prompt=False)
        full = tokenizer.apply_chat_template(
            list(messages) + [{"role": "user", "content": instruction}], add_generation_prompt=True
        )
        if not full.startswith(prefix):
            raise ValueError("the chat template does not render the dialogue as a prefix of dialogue + instruction")
        return full[len(prefix) :] + verdict
    return f"<|user|>{instruction}<|assistant|>{verdict}"


def compress_middle_out(
    messages: Sequence[dict], max_tokens: int, count: Callable[[str], int] | None = None, keep_head: int = 1
) -> tuple[list[dict], int]:
    """Middle-out context compression (PUAudit §3.4): drop whole turns from the middle of the history.

    Turns are dropped until the dialogue fits `max_tokens` (counted by `count`, default whitespace words).
    System messages, the first `keep_head` other turns and the last turn (the rated response) are kept;
    the oldest turns after the head go first (recency bias). Returns (messages, n_dropped).
    """
    count = count or (lambda s: len(s.split()))
    msgs = list(messages)
    sizes = [count(m["content"]) for m in msgs]
    head = [i for i, m in enumerate(msgs) if m["role"] != "system"][:keep_head]
    protected = {i for i, m in enumerate(msgs) if m["role"] == "system"} | set(head) | {len(msgs) - 1}
    droppable = [i for i in range(len(msgs)) if i not in protected]
    dropped = set()
    total = sum(sizes)
    for i in droppable:
        if total <= max_tokens:
            break
        dropped.add(i)
        total -= sizes[i]
    return [m for i, m in enumerate(msgs) if i not in dropped], len(dropped)


# ---------------------------------------------------------------------------------------------
# 2. Extraction


@dataclass
class ExtractionStats:
    """What an extraction run cost: items, forward tokens, seconds, and sessions per hour.

    Attributes:
        n_items: dialogues encoded.
        n_suffixes: suffixes per dialogue (2 per probe).
        prefix_tokens: tokens of all prefixes (each once).
        suffix_tokens: tokens of all suffixes.
        computed_tokens: tokens actually run through the model.
        seconds: wall-clock time of the run (seconds).
        reuse_prefix: whether each prefix's KV cache was shared by its suffixes.
    """

    n_items: int = 0
    n_suffixes: int = 0
    prefix_tokens: int = 0  # tokens of all prefixes (each once)
    suffix_tokens: int = 0  # tokens of all suffixes
    computed_tokens: int = 0  # tokens actually run through the model
    seconds: float = 0.0
    reuse_prefix: bool = True

    @property
    def sessions_per_hour(self) -> float:
        """Dialogues encoded per hour of wall-clock time (NaN when no time was measured)."""
        return 3600.0 * self.n_items / self.seconds if self.seconds > 0 else float("nan")


def contrastive_vectors(
    pre,
    dialogues: Sequence[Sequence[dict]],
    probes: Sequence[ProbePrompt],
    *,
    layers=-1,
    reuse_prefix: bool = True,
    batch_size: int = 8,
    progress: bool = False,
    mesh=None,
) -> tuple[np.ndarray, ExtractionStats]:
    """Contrastive hidden states v = h(prefix + positive) - h(prefix + negative), and their cost.

    Each dialogue's prefix is encoded once and its KV cache shared by the 2T suffixes
    (`reuse_prefix=True`), or prefix + suffix are recomputed for every suffix
    (`reuse_prefix=False`): same token ids, same states up to fp rounding.

    Args:
        pre: a decoder `Pretrained`.
        dialogues: n lists of chat messages (rated response last).
        probes: T prompts.
        layers: an int or a sequence of L hidden-state indices (HF numbering, -1 = final).
        reuse_prefix: share each prefix's KV cache among its suffixes.
        batch_size: suffixes per forward.
        progress: a progress bar over the dialogues.
        mesh: a jax.sharding.Mesh each batch of suffixes is split over, or None (one device).

    Returns:
        (V, stats): V (n, T, d) float32 for an int `layers`, (n, T, L, d) for a sequence; the
        `ExtractionStats` of the run (tokens, seconds).
    """
    from tqdm.auto import tqdm

    if not pre.config.is_decoder:
        raise ValueError("contrastive probing needs a decoder (final-token states of a causal model)")
    squeeze = isinstance(layers, (int, np.integer))
    lay = [int(layers)] if squeeze else [int(x) for x in layers]
    stats = ExtractionStats(n_items=len(dialogues), n_suffixes=2 * len(probes), reuse_prefix=reuse_prefix)
    out = np.zeros((len(dialogues), len(probes), len(lay), pre.config.hidden_size), np.float32)
    t0 = time.perf_counter()
    for i, msgs in enumerate(tqdm(dialogues, desc="contrastive", disable=not progress, unit="dialogue")):
        p_ids, s_ids = _dialogue_ids(pre.tokenizer, msgs, probes)
        stats.prefix_tokens += len(p_ids)
        stats.suffix_tokens += sum(map(len, s_ids))
        h, computed = _suffix_states(pre, p_ids, s_ids, lay, reuse_prefix, batch_size, mesh)
        stats.computed_tokens += computed
        h = h.reshape(len(probes), 2, len(lay), -1)
        out[i] = h[:, 0] - h[:, 1]
    stats.seconds = time.perf_counter() - t0
    return (out[:, :, 0] if squeeze else out), stats


def _dialogue_ids(tok, msgs: Sequence[dict], probes: Sequence[ProbePrompt]) -> tuple[list[int], list[list[int]]]:
    """Token ids of one dialogue: the prefix and its 2T suffixes.

    The prefix is `render_prefix` (special tokens included), the suffixes `render_suffix` (no special
    tokens), ordered probe by probe, positive then negative.
    """
    from probes.models.batching import tokenize_inputs

    p_ids = tokenize_inputs(tok, [render_prefix(tok, msgs)])[0]
    s_texts = [render_suffix(tok, msgs, p.instruction, verdict) for p in probes for verdict in (p.positive, p.negative)]
    return p_ids, tokenize_inputs(tok, s_texts, special=False)


def _suffix_states(pre, p_ids: list[int], s_ids: list[list[int]], lay: list[int], reuse_prefix: bool, batch_size, mesh):
    """Final-token states of prefix + every suffix, and the number of tokens run through the model.

    The states are (2T, L, d) float32 for the 2T `s_ids` and the L layers `lay`; the prefix is run once
    with `reuse_prefix`, else once per suffix.
    """
    from probes.extract import EncodeConfig, encode_ids, encode_with_shared_prefix

    if reuse_prefix:
        h = encode_with_shared_prefix(pre, p_ids, s_ids, layers=lay, batch_size=batch_size, mesh=mesh)
        return h, len(p_ids) + sum(map(len, s_ids))
    config = EncodeConfig(layers=tuple(lay), pooling="last", batch_size=batch_size, long_inputs="error")
    h, _ = encode_ids(pre, [p_ids + s for s in s_ids], config, mesh=mesh)
    return h, sum(len(p_ids) + len(s) for s in s_ids)


# ---------------------------------------------------------------------------------------------
# 3. Geometry: intensity, outlierness, polarization index, mining


def intensity(V) -> np.ndarray:
    """||v||_2 per row of V (n, d) -> (n,)."""
    return np.linalg.norm(np.asarray(V, np.float64), axis=1)


def outlierness(V, centroid) -> np.ndarray:
    """Manhattan distance ||v - c||_1 per row of V (n, d) to the centroid c (d,) -> (n,)."""
    return np.abs(np.asarray(V, np.float64) - np.asarray(centroid, np.float64)).sum(axis=1)


def polarization_index(V, reference=None, orientation: float = 1.0) -> np.ndarray:
    """PI(v) = orientation * z(v) * (1 + F_D(D(v))) (module docstring) for V (n, d) -> (n,).

    reference: the (m, d) set that fixes the centroid, the robust scale of ||v|| and the CDF of D
    (default: V itself, i.e. unsupervised on the pool being mined).
    """
    V = np.asarray(V, np.float64)
    R = V if reference is None else np.asarray(reference, np.float64)
    c = R.mean(axis=0)
    n_ref = intensity(R)
    med = np.median(n_ref)
    mad = 1.4826 * np.median(np.abs(n_ref - med))
    if mad == 0:
        mad = np.std(n_ref) or 1.0
    z = (intensity(V) - med) / mad
    d_ref = np.sort(outlierness(R, c))
    f_d = np.searchsorted(d_ref, outlierness(V, c), side="right") / len(d_ref)
    return orientation * z * (1.0 + f_d)


def mine_polarized(pi, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the k highest and the k lowest PI (highest first / lowest first)."""
    order = np.argsort(np.asarray(pi), kind="stable")
    k = min(int(k), len(order) // 2)
    return order[::-1][:k], order[:k]


# ---------------------------------------------------------------------------------------------
# 4-5. Features, resampling


def geometric_features(V, centroid) -> np.ndarray:
    """[v, ||v||_2, ||v - c||_1] for V (n, d) -> (n, d + 2) (seed Appendix E)."""
    V = np.asarray(V)
    return np.concatenate(
        [V, intensity(V)[:, None].astype(V.dtype), outlierness(V, centroid)[:, None].astype(V.dtype)], axis=1
    )


def density_resample(
    values,
    rng: np.random.Generator,
    *,
    power: float = 1.0,
    bins: int = 10,
    max_ratio: float = 5.0,
    size: int | None = None,
) -> np.ndarray:
    """Indices (size,) drawn with replacement with probability proportional to 1 / density(values)^power.

    The density is the histogram count of each value's bin (`bins` equal width bins), weight ratios
    clipped to `max_ratio`. power = 0 is the plain bootstrap; power = 1 makes the resampled values
    near-uniform over their range. With values = D (distance to the centroid) this is the paper's
    geometric resampling.
    """
    x = np.asarray(values, np.float64)
    n = len(x)
    size = n if size is None else int(size)
    edges = np.histogram_bin_edges(x, bins=bins)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    count = np.bincount(which, minlength=bins)[which].astype(float)
    w = count ** (-power)
    w = np.minimum(w, w.min() * max_ratio)
    return rng.choice(n, size=size, replace=True, p=w / w.sum())


# ---------------------------------------------------------------------------------------------
# 4. Heads


@dataclass(frozen=True)
class HeadConfig:
    """A regression head on contrastive vectors.

    Attributes:
        n_components: PLS (or PCA) components.
        reducer: "pls" | "pca".
        geometric: append ||v|| and D.
        resample: None | "geometric" (density of D) | "label" (density of the training y).
        power: `density_resample`'s power.
        bins: `density_resample`'s bins.
        max_ratio: `density_resample`'s max_ratio.
        n_resamples: heads averaged over independent resamples (bagging; 1 = a single resample).
        scale: clip predictions to (low, high) or None.
        seed: numpy Generator seed of the resampling.
    """

    n_components: int = 8
    reducer: str = "pls"
    geometric: bool = True
    resample: str | None = "geometric"
    power: float = 1.0
    bins: int = 10
    max_ratio: float = 5.0
    n_resamples: int = 1
    scale: tuple[float, float] | None = (1.0, 5.0)
    seed: int = 0


class _PCR:
    """Principal-component regression on standardised features (the paper's "PCA instead of PLS")."""

    def __init__(self, n_components: int):
        self.n_components = n_components

    def fit(self, X, y):
        X = np.asarray(X, np.float64)
        self.mean_, self.std_ = X.mean(0), X.std(0, ddof=1)
        self.std_[self.std_ == 0] = 1.0
        Z = (X - self.mean_) / self.std_
        _, _, vt = np.linalg.svd(Z, full_matrices=False)
        self.components_ = vt[: self.n_components]
        T = Z @ self.components_.T
        self.y_mean_ = float(np.mean(y))
        self.coef_, *_ = np.linalg.lstsq(T, np.asarray(y, np.float64) - self.y_mean_, rcond=None)
        return self

    def predict(self, X):
        Z = (np.asarray(X, np.float64) - self.mean_) / self.std_
        return Z @ self.components_.T @ self.coef_ + self.y_mean_


class BorpHead:
    """Features -> (resampling) -> PLS / PCA regression -> clipped scores. V (n, d), y (n,).

    ``mesh`` (a jax.sharding.Mesh of this process's devices, or None): the PLS fits split their
    samples over its devices. It is used by ``fit`` only and not kept, so a fitted head pickles.
    """

    def __init__(self, config: HeadConfig = HeadConfig(), mesh=None):
        self.config = config
        self.mesh = mesh

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "mesh"}

    def __setstate__(self, state):
        self.__dict__.update(state, mesh=None)

    def _features(self, V):
        return geometric_features(V, self.centroid_) if self.config.geometric else np.asarray(V)

    def fit(self, V, y):
        """Fit the head(s) on V (n, d), y (n,) and return self; a bad reducer / resample is a ValueError."""
        cfg = self.config
        V, y = np.asarray(V), np.asarray(y, np.float64)
        if cfg.reducer not in ("pls", "pca"):
            raise ValueError(f"reducer must be 'pls' or 'pca', not {cfg.reducer!r}")
        if cfg.resample not in (None, "geometric", "label"):
            raise ValueError(f"resample must be None, 'geometric' or 'label', not {cfg.resample!r}")
        self.centroid_ = V.mean(axis=0)
        F = self._features(V)
        rng = np.random.default_rng(cfg.seed)
        driver = outlierness(V, self.centroid_) if cfg.resample == "geometric" else y
        k = min(cfg.n_components, len(y) - 1, F.shape[1])
        self.models_ = []
        for _ in range(cfg.n_resamples if cfg.resample else 1):
            idx = (
                density_resample(driver, rng, power=cfg.power, bins=cfg.bins, max_ratio=cfg.max_ratio)
                if cfg.resample
                else np.arange(len(y))
            )
            kk = min(k, len(np.unique(idx)) - 1)
            model = PLSRegression(kk, mesh=self.mesh) if cfg.reducer == "pls" else _PCR(kk)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(exhausted|y residual is constant).*")
                self.models_.append(model.fit(F[idx], y[idx]))
            if cfg.reducer == "pls":
                model.set_params(mesh=None)  # a fitted model keeps no mesh: it must pickle
        return self

    def predict(self, V) -> np.ndarray:
        """Scores (n,) of V (n, d): the mean over the fitted heads, clipped to the config's scale."""
        F = self._features(V)
        pred = np.mean([np.asarray(m.predict(F), np.float64).ravel() for m in self.models_], axis=0)
        return np.clip(pred, *self.config.scale) if self.config.scale is not None else pred


class LayerwiseHeads:
    """Two heads, intermediate and final layer (PUAudit §3.3): predict -> (y_final, y_mid, ``|diff|``).

    V (n, L, d) with layer axis 1; `mid` and `final` index into it.
    """

    def __init__(self, config: HeadConfig = HeadConfig(), mid: int = 0, final: int = -1):
        self.config, self.mid, self.final = config, mid, final

    def fit(self, V, y):
        """Fit both heads on V (n, L, d), y (n,) and return self."""
        V = np.asarray(V)
        self.head_final_ = BorpHead(self.config).fit(V[:, self.final], y)
        self.head_mid_ = BorpHead(self.config).fit(V[:, self.mid], y)
        return self

    def predict(self, V):
        """(y_final (n,), y_mid (n,), ``|y_final - y_mid|`` (n,)) of V (n, L, d)."""
        V = np.asarray(V)
        yf, ym = self.head_final_.predict(V[:, self.final]), self.head_mid_.predict(V[:, self.mid])
        return yf, ym, np.abs(yf - ym)


# ---------------------------------------------------------------------------------------------
# Evaluation helpers


def grouped_kfold(groups, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds with whole groups held out (e.g. all responses of one dialogue), groups shuffled by `seed`."""
    groups = np.asarray(groups)
    uniq = np.unique(groups)
    if len(uniq) < n_splits:
        raise ValueError(f"{len(uniq)} groups cannot make {n_splits} folds")
    perm = np.random.default_rng(seed).permutation(uniq)
    fold_of = {g: i % n_splits for i, g in enumerate(perm)}
    f = np.array([fold_of[g] for g in groups])
    return [(np.nonzero(f != k)[0], np.nonzero(f == k)[0]) for k in range(n_splits)]


def cross_val_predict(make_head: Callable[[], object], V, y, folds) -> np.ndarray:
    """Out-of-fold predictions (n,) of heads built by `make_head()`.

    For `LayerwiseHeads` (n, 3): final, mid, uncertainty.
    """
    V, y = np.asarray(V), np.asarray(y, np.float64)
    out = None
    for train, test in folds:
        pred = make_head().fit(V[train], y[train]).predict(V[test])
        pred = np.column_stack(pred) if isinstance(pred, tuple) else np.asarray(pred)
        if out is None:
            out = np.full((len(y),) + pred.shape[1:], np.nan)
        out[test] = pred
    return out


def agreement(y_true, y_pred) -> dict:
    """Agreement of human and predicted scores: K-alpha, Pearson r with its 95 % CI, RMSE.

    K-alpha (interval; ordinal on the values as they are) treats them as two raters.
    """
    from probes.stats import krippendorff_alpha, pearson

    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    r = pearson(y_true, y_pred)
    pair = np.vstack([y_true, y_pred])
    return dict(
        k_alpha=krippendorff_alpha(pair, "interval"),
        k_alpha_ordinal=krippendorff_alpha(pair, "ordinal"),
        pearson=r.r,
        pearson_low=r.low,
        pearson_high=r.high,
        rmse=float(np.sqrt(np.mean((y_true - y_pred) ** 2))),
        n=int(len(y_true)),
    )


# ---------------------------------------------------------------------------------------------
# 7. Rubric bootstrapping (PUAudit §3.2 Phase 3, Appendix A Figures 5-6; the figures' text is lost,
# these prompts follow the paper's description: reverse-engineer behaviour-oriented criteria with
# observable signal features from extreme cases, then fuse several drafts into one standard)


REVERSE_PROMPT = """You are an expert in conversation quality evaluation. Below are real conversations that \
were rated at the two extremes of "{criterion}" on a {low}-{high} scale.

=== Extremely HIGH cases ===
{high_cases}

=== Extremely LOW cases ===
{low_cases}

Reverse-engineer a detailed, behaviour-oriented scoring rubric for "{criterion}" from these cases. \
For every score from {high} down to {low}, describe the observable behaviour that earns it and list its \
signal features (concrete, checkable cues in the text). Do not describe the specific topics of the \
cases; describe behaviours that generalise.
Answer with one line per score, formatted exactly as "<score>: <criteria> (Signal features: ...)"."""

FUSION_PROMPT = """You are given {n} draft rubrics for "{criterion}" on a {low}-{high} scale, written \
independently from different samples of extreme cases.

{drafts}

Fuse them into one final standard: keep the criteria the drafts agree on, resolve conflicts in \
favour of the most specific observable behaviour, and make adjacent scores clearly distinguishable.
Answer with one line per score from {high} down to {low}, formatted exactly as \
"<score>: <criteria> (Signal features: ...)"."""


@dataclass(frozen=True)
class BootstrappedRubric:
    """The fused rubric ({score: text}), its raw text, the drafts, and every prompt sent."""

    criterion: str
    rubric: dict
    text: str
    drafts: tuple[str, ...]
    prompts: tuple[str, ...] = field(default=())


def parse_rubric(text: str, scores: Sequence[int]) -> dict:
    """{score: description} from lines "<score>: ..." (also "Score 5 -", "5." ...); missing -> ""."""
    import re

    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:score\s*)?\**\s*(\d+)\s*\**\s*[:.)\-]\s*(.+)$", line, flags=re.I)
        if m and int(m.group(1)) in scores and int(m.group(1)) not in out:
            out[int(m.group(1))] = m.group(2).strip()
    return {s: out.get(s, "") for s in scores}


def bootstrap_rubric(
    generate: Callable[[str], str],
    high_cases: Sequence[str],
    low_cases: Sequence[str],
    *,
    criterion: str,
    scale=(1, 5),
    n_drafts: int = 3,
    cases_per_draft: int = 5,
    seed: int = 0,
) -> BootstrappedRubric:
    """Probe-guided rubric bootstrapping: `n_drafts` reverse-engineering prompts, then one fusion prompt.

    Each draft's prompt sees a disjoint random subset of the mined high / low cases (ensemble).

    generate: prompt -> completion (e.g. an OpenAI-compatible client's chat call); cases: texts of
    the mined extremes (e.g. `mine_polarized` of the blind-probe PI).
    """
    low, high = int(scale[0]), int(scale[1])
    rng = np.random.default_rng(seed)
    hi_order, lo_order = rng.permutation(len(high_cases)), rng.permutation(len(low_cases))
    fmt = lambda cases: "\n\n".join(f"[{j + 1}] {c}" for j, c in enumerate(cases))  # noqa: E731
    prompts, drafts = [], []
    for k in range(n_drafts):
        hi = [high_cases[i] for i in hi_order[k * cases_per_draft : (k + 1) * cases_per_draft]] or list(high_cases[:1])
        lo = [low_cases[i] for i in lo_order[k * cases_per_draft : (k + 1) * cases_per_draft]] or list(low_cases[:1])
        prompt = REVERSE_PROMPT.format(criterion=criterion, low=low, high=high, high_cases=fmt(hi), low_cases=fmt(lo))
        prompts.append(prompt)
        drafts.append(generate(prompt))
    joined = "\n\n".join(f"--- Draft {k + 1} ---\n{d}" for k, d in enumerate(drafts))
    fusion = FUSION_PROMPT.format(n=n_drafts, criterion=criterion, low=low, high=high, drafts=joined)
    prompts.append(fusion)
    text = generate(fusion)
    return BootstrappedRubric(
        criterion=criterion,
        rubric=parse_rubric(text, list(range(high, low - 1, -1))),
        text=text,
        drafts=tuple(drafts),
        prompts=tuple(prompts),
    )
