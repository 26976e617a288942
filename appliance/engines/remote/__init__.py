"""The ``openai`` engine: pages read by OpenAI-compatible vision servers on other hosts
(llama-server, vLLM, SGLang, Ollama, llama-cpp-python's server), one worker per
[[engine.remote]] endpoint."""
