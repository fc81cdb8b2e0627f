"""Schemas of a provider block, a resource or a data source, described in Python.

    Schema(
        description="A tenant network.",
        attributes={
            "name": Attribute(STRING, "Network name.", required=True, force_new=True),
            "cidr": Attribute(STRING, "IPv4 CIDR.", required=True, force_new=True),
            "tags": Attribute(map_of(STRING), "Free-form labels.", optional=True),
            "id":   Attribute(STRING, "Identifier.", computed=True),
        },
    )

Attributes, and single nested blocks (``timeouts { create = "5m" }``: a ``Block``, absent is null).
``force_new`` is ours, not the protocol's: the default plan asks OpenTofu to replace the resource when
such an attribute changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .codec import _kind, type_json


@dataclasses.dataclass(frozen=True)
class Attribute:
    type: Any = "string"
    description: str = ""
    required: bool = False
    optional: bool = False
    computed: bool = False
    sensitive: bool = False
    force_new: bool = False
    deprecated: bool = False

    def __post_init__(self) -> None:
        _kind(self.type)  # raises on a malformed type
        if self.required and (self.optional or self.computed):
            raise ValueError("an attribute is either required, or optional and/or computed")
        if not (self.required or self.optional or self.computed):
            raise ValueError("an attribute must be required, optional or computed")


@dataclasses.dataclass(frozen=True)
class Block:
    """A nested block given at most once (nesting SINGLE): its value is an object of its attributes, or
    null when the configuration leaves it out."""

    attributes: dict[str, Attribute]
    description: str = ""

    @property
    def type(self) -> list:
        return ["object", {name: a.type for name, a in self.attributes.items()}]

    def to_proto(self, pb: Any) -> Any:
        return pb.Schema.Block(attributes=_attributes_pb(pb, self.attributes), description=self.description,
                               description_kind=pb.StringKind.PLAIN)


def _attributes_pb(pb: Any, attributes: dict[str, Attribute]) -> list:
    return [pb.Schema.Attribute(
        name=name, type=type_json(a.type), description=a.description, description_kind=pb.StringKind.PLAIN,
        required=a.required, optional=a.optional, computed=a.computed, sensitive=a.sensitive,
        deprecated=a.deprecated) for name, a in sorted(attributes.items())]


@dataclasses.dataclass(frozen=True)
class Schema:
    attributes: dict[str, Attribute] = dataclasses.field(default_factory=dict)
    description: str = ""
    version: int = 0
    deprecated: bool = False
    blocks: dict[str, Block] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.attributes:
            if not name or not (name[0].isalpha() or name[0] == "_") or not name.replace("_", "a").isalnum() \
                    or name != name.lower():
                raise ValueError(f"bad attribute name {name!r}: lower-case letters, digits and _")

    @property
    def type(self) -> list:
        """The object type of a whole value of this schema (what the codec needs)."""
        return ["object", {**{name: a.type for name, a in self.attributes.items()},
                           **{name: b.type for name, b in self.blocks.items()}}]

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a whole value has: the attributes and the blocks."""
        return (*self.attributes, *self.blocks)

    @property
    def force_new(self) -> tuple[str, ...]:
        return tuple(n for n, a in self.attributes.items() if a.force_new)

    @property
    def computed(self) -> tuple[str, ...]:
        return tuple(n for n, a in self.attributes.items() if a.computed)

    def to_proto(self, pb: Any) -> Any:
        """A ``tfplugin6.Schema`` message (``pb`` is the generated ``tfplugin6_pb2`` module)."""
        nested = [pb.Schema.NestedBlock(type_name=name, block=b.to_proto(pb), nesting=pb.Schema.NestedBlock.SINGLE)
                  for name, b in sorted(self.blocks.items())]
        block = pb.Schema.Block(version=self.version, attributes=_attributes_pb(pb, self.attributes),
                                block_types=nested, description=self.description,
                                description_kind=pb.StringKind.PLAIN, deprecated=self.deprecated)
        return pb.Schema(version=self.version, block=block)
