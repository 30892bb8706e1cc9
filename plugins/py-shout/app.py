"""py-shout: a Hangar output mapper written in Python (componentize-py):
upper-cases every text block of a result.

Build: componentize-py -d ../../wit -w mapper componentize app -o py-shout.wasm
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import types


class WitWorld(wit_world.WitWorld):
    def map(self, ctx: types.CallContext, payload: str) -> str:
        data = json.loads(payload)
        result = data.get("result")
        if result is None:
            raise Err(types.MapperError(message="py-shout is an output mapper: no result in the payload"))
        for block in result.get("content", []):
            if block.get("type") == "text":
                block["text"] = block["text"].upper()
        return json.dumps(result)
