"""A toy provider for the protocol tests only: objects are JSON files in a directory (the provider's
``store`` setting), so a test can change or delete them behind OpenTofu's back."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from netpeer_provider.tofu import (NUMBER, STRING, Attribute, DataSource, Provider, Resource,
                                   Schema, TofuError, error, map_of, warn, warning)


def _store(provider: ToyProvider) -> Path:
    if provider.store is None:
        raise TofuError("the provider is not configured", "set `store` in the provider block")
    return provider.store


class Toy(Resource):
    type_name = "netpeer_toy"
    schema = Schema(description="A toy object stored as a JSON file.", attributes={
        "name": Attribute(STRING, "Name, unique in the store.", required=True, force_new=True),
        "value": Attribute(STRING, "Some text.", optional=True),
        "tags": Attribute(map_of(STRING), "Labels.", optional=True),
        "id": Attribute(STRING, "Identifier given by the store.", computed=True),
        "serial": Attribute(NUMBER, "Bumped on every write.", computed=True),
    })

    def validate(self, config):
        name = config["name"]
        if isinstance(name, str) and not name.isidentifier():
            yield error("invalid name", f"{name!r} must be an identifier", "name")
        if config["value"] == "deprecated":
            yield warning("value is deprecated", "pick another value", "value")

    def plan(self, prior, proposed, config):
        plan = super().plan(prior, proposed, config)
        if prior is not None and plan.planned is not None and not plan.requires_replace \
                and plan.planned != prior:
            plan.planned["serial"] = prior["serial"] + 1
        return plan

    def _path(self, id_: str) -> Path:
        return _store(self.provider) / f"{id_}.json"

    def _write(self, state: dict) -> dict:
        self._path(state["id"]).write_text(json.dumps(state))
        return state

    def create(self, planned, config):
        for f in _store(self.provider).glob("*.json"):
            if json.loads(f.read_text())["name"] == planned["name"]:
                raise TofuError("name already taken", f"a toy named {planned['name']!r} exists", "name")
        return self._write({**planned, "id": uuid.uuid4().hex[:12], "serial": 1})

    def read(self, state):
        path = self._path(state["id"])
        if not path.exists():
            return None
        return json.loads(path.read_text())

    def update(self, prior, planned, config):
        return self._write(planned)

    def delete(self, state):
        self._path(state["id"]).unlink(missing_ok=True)

    def import_state(self, id):
        if not self._path(id).exists():
            raise TofuError("cannot import", f"no toy with id {id!r}")
        return {"id": id}


class ToyData(DataSource):
    type_name = "netpeer_toy"
    schema = Schema(attributes={
        "name": Attribute(STRING, "Name to look up.", required=True),
        "value": Attribute(STRING, computed=True),
        "id": Attribute(STRING, computed=True),
    })

    def read(self, config):
        for f in _store(self.provider).glob("*.json"):
            obj = json.loads(f.read_text())
            if obj["name"] == config["name"]:
                return {"name": obj["name"], "value": obj["value"], "id": obj["id"]}
        raise TofuError("no such toy", f"no toy named {config['name']!r}", "name")


class ToyProvider(Provider):
    schema = Schema(attributes={"store": Attribute(STRING, "Directory of the JSON files.", optional=True)})
    resources = (Toy,)
    data_sources = (ToyData,)

    def __init__(self):
        super().__init__()
        self.store: Path | None = None

    def configure(self, config, tofu_version):
        store = config["store"] or os.environ.get("TOY_STORE")
        if store is None:
            return
        self.store = Path(store)
        if not self.store.is_dir():
            raise TofuError("store is not a directory", str(self.store), "store")
        if config["store"] is None:
            warn("store taken from TOY_STORE")
