"""GGUF files, apart from the engine that runs them: their headers read without the
weights (``header``), a text model and its projector checked as a pair before
llama.cpp loads them (``pair``), their sizes and checksums (``files``), and
random-weight models written for tests (``testmodel``) and benches (``shapes``).
The vision engine, ``doctor``, ``models`` and ``bench`` all read them from here."""
