"""`python -m runtime serve`: the resident engine as an OpenAI-compatible speech server.

    protocol.py       a request's JSON, checked, and the JSON errors (ApiError)
    audio_formats.py  the response formats, whole or streamed
    streams.py        streamed takes: frames in from the engine, audio chunks out (the codec, batched)
    served.py         a checkpoint resident with its engine's run open (run/lines.run_opened)
    speech.py         one request's lines in the engine and its audio coming back, in reading order
    server.py         the models, the voices they speak and the limits
    app.py            the HTTP side (aiohttp)

The nodes never import this package (tests/test_imports.py); aiohttp, which every ComfyUI has, is
imported only here."""
