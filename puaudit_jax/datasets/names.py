"""The names of the bundled comparison sets and of the style counts: light, for the ``puaudit`` parser.

Plain tuples, importable without pandas or numpy; :mod:`.bundled` and :mod:`.style` give them
with the code that uses them.
"""

BUNDLED = ("mtbench", "llmfao-gpt4", "llmfao-gpt3")
STYLE_FEATURES = ("chars", "tokens", "headers", "list_items", "bold", "code_blocks")
