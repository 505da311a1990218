"""LLM judging: an OpenAI-compatible chat client, versioned prompts, a pinned judge with a cache and call log.

`settings.JudgeSettings` (the `judge:` config block), `client.ChatClient`, `prompts.load_prompt`,
`judge.Judge` (verdicts as values or statuses), `store` (identity, cache, log), `local` (a loopback
tinyq4 server on a GGUF file). Nothing here imports a heavy library.
"""
