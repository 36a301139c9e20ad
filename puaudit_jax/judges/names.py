"""Names the ``puaudit`` parser needs from the judges: light, importable without pandas or numpy.

:mod:`.openai_chat` uses them with the code that reads them.
"""

API_KEY_ENV = "OPENAI_API_KEY"  # where the API key is read from unless ``api_key_env`` names another variable
