"""The llama.cpp vision-language engine: a Gemma-class GGUF + mmproj pair run through llama-cpp-python."""
