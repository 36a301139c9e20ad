"""BoRP: bootstrapped regression probing (BoRP, §3, §5, Appendix E), one module per step.

Pipeline, top to bottom (each module's docstring tells its step in full):

1. `prompts`: a dialogue is the shared prefix; a probe is a pair of suffix prompts, one user
   instruction followed by a positive or a negative verdict (`blind_probe`, `rubric_probe`);
   `compress_middle_out` drops middle turns of long histories (§3.4).
2. `extraction`: v = h(prefix + positive) - h(prefix + negative) at any set of layers, each prefix's
   KV cache shared by its suffixes (`contrastive_vectors`, §3.4).
3. `geometry`: intensity ||v||_2, outlierness D = ||v - c||_1, the polarization index and mining of
   its extremes (§3.2 Phase 2); the features [v, ||v||_2, D] and geometric resampling (§3.3).
4. `heads`: features -> (resampling) -> PLS / PCA regression -> clipped scores (`BorpHead`), and
   layer-wise uncertainty (`LayerwiseHeads`, §3.3 / §5.2).
5. `cross_validation`: grouped folds, out-of-fold predictions, agreement with human scores.
6. `rubric`: rubric bootstrapping from the mined extremes through a generator callable (§3.2
   Phase 3; `probes` never imports puaudit_jax).

Every public name is imported from here (`from probes.borp import BorpHead`).
"""

from .cross_validation import agreement, cross_val_predict, grouped_kfold
from .extraction import ExtractionStats, contrastive_vectors
from .geometry import density_resample, geometric_features, intensity, mine_polarized, outlierness, polarization_index
from .heads import _PCR as _PCR  # heads pickled before the split name it probes.borp._PCR
from .heads import BorpHead, HeadConfig, LayerwiseHeads
from .prompts import ProbePrompt, blind_probe, compress_middle_out, render_prefix, render_suffix, rubric_probe
from .rubric import FUSION_PROMPT, REVERSE_PROMPT, BootstrappedRubric, bootstrap_rubric, parse_rubric

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
