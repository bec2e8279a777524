"""Settings for the whole suite."""

from hypothesis import settings

# Property tests run on small, shared CI machines: time them out by example count, not by a
# per-example deadline that a busy neighbour could break.
settings.register_profile("streamtide", deadline=None, print_blob=True)
settings.load_profile("streamtide")
