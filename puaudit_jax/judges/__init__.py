"""Judges and text generators for the attack-judge protocol (PUAudit §5.2, Algorithm 2, Appendix B.2-B.3).

- :class:`Verdict`, the :class:`Judge` / :class:`Generator` protocols, :func:`parse_verdict`
  (seed Figure 10 output format), the prompt templates (package data under ``templates/``) and the
  on-disk response cache: :mod:`.base`.
- :class:`OpenAIChatJudge`, :class:`OpenAILogprobJudge`, :class:`OpenAIChatGenerator`,
  :class:`ChatClient`: an OpenAI-compatible server (chat and completions endpoints), standard
  library only: :mod:`.openai_chat`.
- :class:`~.serve.LocalServer`: llama.cpp's server on loopback (the ``serve`` extra): :mod:`.serve`.
- :class:`LocalJudge`, :class:`LocalGenerator`: in-process Flax SmolLM2-135M-Instruct (imported
  lazily, so the HTTP clients do not load JAX models): :mod:`.local`.
- :func:`judge_table`: re-judge a comparison table: :mod:`.run`.
- The attacks on the judge's losers (distraction, length, sentiment; Algorithm 2): :mod:`.attacks`.
"""

from puaudit_runtime.lazy import lazy_package

__all__ = [
    "ChatAPIError",
    "ChatClient",
    "ERROR",
    "Generator",
    "Judge",
    "LocalGenerator",
    "LocalJudge",
    "OK",
    "OpenAIChatGenerator",
    "OpenAIChatJudge",
    "OpenAILogprobJudge",
    "ResponseCache",
    "UNPARSED",
    "Verdict",
    "content_key",
    "fill",
    "judge_inputs",
    "judge_messages",
    "judge_table",
    "parse_verdict",
    "row_inputs",
    "template",
]


__getattr__, __dir__ = lazy_package(
    __name__,
    {
        ".base": (
            "ERROR",
            "OK",
            "UNPARSED",
            "Generator",
            "Judge",
            "ResponseCache",
            "Verdict",
            "content_key",
            "fill",
            "judge_inputs",
            "judge_messages",
            "parse_verdict",
            "row_inputs",
            "template",
        ),
        ".openai_chat": ("ChatAPIError", "ChatClient", "OpenAIChatGenerator", "OpenAIChatJudge", "OpenAILogprobJudge"),
        ".run": ("judge_table",),
        ".local": ("LocalGenerator", "LocalJudge"),  # in-process Flax models, imported on first use
    },
)
