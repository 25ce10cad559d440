"""GGUF, read and understood: llama.cpp's file format and what llama.cpp makes of it.

:mod:`.header` walks a header with every declared size checked against the file; :mod:`.kv`
reads its keys and values; :mod:`.reader` is what the rest of the floor and the suite call
(fields, tensor shapes, metadata). :mod:`.pretypes` maps ``tokenizer.ggml.pre`` names to the
splits llama.cpp applies; :mod:`.pre` says which pre type reproduces an artifact and which token
texts llama.cpp retypes on load; :mod:`.llama_convert` runs llama.cpp's own converter with our
hash registered.

Out of scope: writing GGUFs (``export/gguf_fmt.py``, ``export/gguf_model.py`` write through
this package), tensor data.
"""
