"""Tokenizer: a `tokenizers.Tokenizer` from local files plus special tokens and the chat template.

Reads `tokenizer.json` (+ `tokenizer_config.json`, `special_tokens_map.json`, `chat_template.jinja`)
from a HF folder; BERT folders with only `vocab.txt` get a WordPiece tokenizer. Truncation and
padding of the backend are switched off: the extraction code decides both and reports cuts.
Chat templates are rendered with jinja2 (sandboxed, `trim_blocks`/`lstrip_blocks` like transformers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import tokenizers


def _token_str(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


@dataclass
class Tokenizer:
    """A `tokenizers.Tokenizer` with the special tokens and chat template of its HF folder.

    Attributes:
        backend: the `tokenizers.Tokenizer` (truncation and padding off).
        special: {name: token string or None} for bos_token, eos_token, pad_token, unk_token,
            cls_token, sep_token.
        chat_template: the jinja2 chat template, or None.
        model_max_length: the model's maximum input length in tokens, or None when unknown.
    """

    backend: tokenizers.Tokenizer
    special: dict = field(default_factory=dict)  # bos_token, eos_token, pad_token, unk_token, cls_token, sep_token
    chat_template: str | None = None
    model_max_length: int | None = None

    # --- special tokens -------------------------------------------------------------------
    def token_id(self, token: str | None) -> int | None:
        """Id of the token string ``token`` (None for None or an unknown token)."""
        return None if token is None else self.backend.token_to_id(token)

    @property
    def bos_token_id(self):
        """Id of the beginning-of-sequence token, or None."""
        return self.token_id(self.special.get("bos_token"))

    @property
    def eos_token_id(self):
        """Id of the end-of-sequence token, or None."""
        return self.token_id(self.special.get("eos_token"))

    @property
    def pad_token_id(self):
        """Id of the padding token; the end-of-sequence token's (or 0) when there is none."""
        pid = self.token_id(self.special.get("pad_token"))
        return pid if pid is not None else (self.eos_token_id or 0)

    @property
    def cls_token_id(self):
        """Id of the classification token, or None."""
        return self.token_id(self.special.get("cls_token"))

    @property
    def sep_token_id(self):
        """Id of the separator token, or None."""
        return self.token_id(self.special.get("sep_token"))

    # --- encoding -------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text`` (no truncation)."""
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """Token ids of each of ``texts`` (no truncation, no padding)."""
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=add_special_tokens)]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """The text of the token ids ``ids``."""
        return self.backend.decode(list(map(int, ids)), skip_special_tokens=skip_special_tokens)

    def num_special_tokens_to_add(self) -> int:
        """Special tokens the post-processor adds to a single sequence (0 without one)."""
        return self.backend.post_processor.num_special_tokens_to_add(False) if self.backend.post_processor else 0

    # --- chat -----------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        """Render `messages` ([{"role", "content"}, ...]) with the model's chat template (a string)."""
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template; use the PUAudit formatting instead")
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(msg):
            raise jinja2.exceptions.TemplateError(msg)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        tmpl = env.from_string(self.chat_template)
        return tmpl.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            **{k: v for k, v in self.special.items() if v is not None},
        )


def load_tokenizer(folder: str | Path) -> Tokenizer | None:
    """Tokenizer of a HF folder, or None when the folder has no tokenizer files."""
    folder = Path(folder)
    cfg = {}
    if (folder / "tokenizer_config.json").is_file():
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
    special = {
        k: _token_str(cfg.get(k))
        for k in ("bos_token", "eos_token", "pad_token", "unk_token", "cls_token", "sep_token")
    }
    if (folder / "special_tokens_map.json").is_file():
        for k, v in json.loads((folder / "special_tokens_map.json").read_text()).items():
            if k in special and special[k] is None:
                special[k] = _token_str(v)
    if (folder / "tokenizer.json").is_file():
        backend = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    elif (folder / "vocab.txt").is_file():
        from tokenizers.implementations import BertWordPieceTokenizer

        backend = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=cfg.get("do_lower_case", True))._tokenizer
    else:
        return None
    backend.no_truncation()
    backend.no_padding()
    template = cfg.get("chat_template")
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text()
    if isinstance(template, list):  # named templates: take the default one
        template = next((t["template"] for t in template if t.get("name") == "default"), template[0]["template"])
    max_len = cfg.get("model_max_length")
    return Tokenizer(backend, special, template, int(max_len) if max_len and max_len < 1e9 else None)
