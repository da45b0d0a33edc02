"""`toolscale synth qa`: a corpus of pages written from the catalog's seeded databases (a hotel's
page with its room types, a team's page with its roster and season) and questions that need one to
three of those pages and, for some, a computation. Each question family is a small module over
the shared core; every kept question is verified against the pages' text (`verify.py`)."""
