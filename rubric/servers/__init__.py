"""Judges that role-rubric runs itself: `fake` (an OpenAI-protocol judge on 127.0.0.1 for trying the
pipeline and for the tests, with `fake_batch`, its Batch API) and `local` (a GGUF model served by
llama-cpp-python for `judge=local`). The client side (rubric/judge/backends.py) talks to them over HTTP only."""
