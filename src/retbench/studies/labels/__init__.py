"""Labels where none exist: LLM relevance labels (relevance), calibration against people (calibrate,
agreement) and synthetic questions for review (synth)."""
