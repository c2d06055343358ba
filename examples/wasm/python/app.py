# A cordis:plugin/tools@0.1.0 guest in Python (componentize-py). Build:
#   pip install componentize-py==0.25.1
#   componentize-py -d ../../../plugins/wasm/wit -w tools componentize app -o count.wasm
import json

import wit_world
from componentize_py_types import Err
from wit_world.exports import guest

_prefix = ""


class Guest(wit_world.exports.Guest):
    def init(self, config: str) -> None:
        global _prefix
        parsed = json.loads(config)
        prefix = parsed.get("prefix", "")
        if not isinstance(prefix, str):
            raise Err("config.prefix must be a string")
        _prefix = prefix

    def describe(self) -> list[guest.Tool]:
        return [
            guest.Tool(
                name="py_count",
                description="Counts the words and characters of a text (a Python guest).",
                parameters=json.dumps(
                    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
                ),
                effect=guest.Effect.READ,
            )
        ]

    def call(self, name: str, arguments: str) -> str:
        if name != "py_count":
            raise Err(f"no tool {name}")
        text = json.loads(arguments).get("text")
        if not isinstance(text, str):
            raise Err('expected {"text": string}')
        return json.dumps({"label": _prefix, "words": len(text.split()), "chars": len(text)})
