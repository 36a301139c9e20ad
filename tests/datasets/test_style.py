"""The style counter (``puaudit_jax.datasets.style``): bold spans counted as the reference regex counts them,
in time linear up to a log factor in the length of a line (adversarial markdown, bounded in a subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from puaudit_jax.datasets.style import _bold_spans, style_counts

# Chatbot Arena's bold pattern, what the counter must agree with: quadratic in a line's length
REFERENCE = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
MARKDOWN = st.lists(st.sampled_from(["*", "**", "***", "_", "__", " ", "\t", "a", "bc", "*a*", "__x__"]), max_size=24)


@settings(max_examples=400)
@given(MARKDOWN.map("".join))
def test_bold_spans_equal_the_reference_regex(line):
    assert _bold_spans(line) == len(REFERENCE.findall(line))


_ADVERSARIAL = """
from puaudit_jax.datasets.style import style_counts
lines = ["**x " * 250_000, "__y " * 250_000, "**" * 500_000, "** " * 330_000, "*_" * 500_000]
print([int(style_counts([line])["bold"].iloc[0]) for line in lines])
"""


def test_one_megabyte_of_unclosed_bold_markers_is_counted_in_bounded_time():
    """Five 1 MB single-line responses that make the reference regex scan to the end of the line for every
    opening (a 200 KB line took 170 s inside `quantify`). The counter runs them in about a second; the 60 s
    bound only catches a return of the quadratic scan, it measures nothing."""
    done = subprocess.run([sys.executable, "-c", _ADVERSARIAL], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 0, 200000, 0, 0]"  # "******" is one span: 20 per 100 characters


def test_bold_spans_inside_code_blocks_and_across_lines_do_not_count():
    text = "**open\nclose** and **one** **two**\n```\n**code**\n```\n"
    assert style_counts([text])["bold"].iloc[0] == 2
