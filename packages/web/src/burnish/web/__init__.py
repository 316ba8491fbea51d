"""burnish models in the browser: ``export`` records a module's forward pass on wgpu and writes
a folder that a web page runs with ``burnish.js`` (WebGPU, or plain JavaScript where the browser
has none). See docs/web.md."""

from burnish.web.export import FORMAT, VERSION, Exported, ExportError, export

__all__ = ["FORMAT", "VERSION", "ExportError", "Exported", "export"]
