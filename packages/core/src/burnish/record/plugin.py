"""core's plugin: registers the first-party record formats through the ``burnish`` entry point."""

from __future__ import annotations

from burnish.plugins.hookspecs import hookimpl
from burnish.record.builtin.binary import BinaryFormat
from burnish.record.builtin.named_msgpack import NamedMsgpackFormat
from burnish.record.builtin.pretty_json import PrettyJsonFormat
from burnish.record.builtin.safetensors import SafetensorsFormat
from burnish.record.format import RecordFormat


@hookimpl
def burnish_record_formats() -> list[RecordFormat]:
    return [SafetensorsFormat(), NamedMsgpackFormat(), PrettyJsonFormat(), BinaryFormat()]
