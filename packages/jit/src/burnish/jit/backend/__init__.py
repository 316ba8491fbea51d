"""``JitBackend``: the whole backend protocol on top of a runtime, one mixin per protocol file."""
