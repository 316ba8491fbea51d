"""The first-party record formats, one module each; ``burnish.record.plugin`` registers them."""
