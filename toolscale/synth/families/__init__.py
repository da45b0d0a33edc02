"""Task families, one module each, composed on the shared builder (`toolscale.synth.builder`) the way
τ²-bench composes its telecom tasks from atomic subtasks: `intents.py` (the write and info requests;
`single` and `multi-intent`), `refusal.py` (the `refused` kind), `computed.py`, `disambiguation.py`,
`conditional.py`. Each family is a `Builder` subclass: it composes its requests, and may tell
records apart its own way or require something of the task it made."""
