"""Profiles: named views of the catalog for different hosts (``[profiles.NAME]``).

A profile chooses the downstream servers, tools, rules and references a host sees, and the
search preset its sessions start with. Each choice left out means "all", except that a
profile naming ``tools`` but not ``servers`` shows only the servers of those tools (their
resources, templates, prompts, completions and ``list_servers`` rows), never every server's.
A session records the profile it was created under; its items, its request contexts and the
searches made for it only ever hold what that profile allows; its usage is its profile's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .config import ProfileConfig
from .errors import ConfigError
from .items import ItemRef
from .presets import PresetName

__all__ = ["Profile", "Profiles", "build_profiles", "unknown_items", "unknown_servers"]


@dataclass(frozen=True)
class Profile:
    """What one profile lets a host see; ``None`` in a field means everything of that kind
    (but see :meth:`allows_server`). ``tools`` holds ``server/tool`` or ``server__tool``: the
    configured server's name and the tool as that downstream names it."""

    name: str
    servers: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    rules: frozenset[str] | None = None
    references: frozenset[str] | None = None
    preset: PresetName | None = None

    @classmethod
    def from_config(cls, name: str, config: ProfileConfig) -> Profile:
        """The profile a ``[profiles.NAME]`` table describes."""

        def chosen(values: tuple[str, ...] | None) -> frozenset[str] | None:
            return None if values is None else frozenset(values)

        return cls(
            name,
            chosen(config.servers),
            chosen(config.tools),
            chosen(config.rules),
            chosen(config.references),
            config.preset,
        )

    @property
    def every_server(self) -> bool:
        """Whether the profile shows every server (it names neither servers nor tools)."""
        return self.servers is None and self.tools is None

    def allows_server(self, server: str) -> bool:
        """Whether the profile shows anything of ``server``: its tools, resources, resource
        templates, prompts, completions and its row in ``list_servers``. ``servers`` says
        which when given; else a profile that names ``tools`` shows the servers of those
        tools alone; else every server."""
        if self.servers is not None:
            return server in self.servers
        if self.tools is not None:
            return any(_names_server(entry, server) for entry in self.tools)
        return True

    def allows_tool(self, server: str, tool: str) -> bool:
        """Whether the downstream ``tool`` of ``server`` is in the profile: matched by server
        and the downstream's own tool name, never by the name a host calls it by (a
        ``prefix = ""`` server's tool ``zeta__deploy`` is not server ``zeta``'s ``deploy``)."""
        if not self.allows_server(server):
            return False
        if self.tools is None:
            return True
        return not self.tools.isdisjoint({f"{server}/{tool}", f"{server}__{tool}"})

    def allows(self, ref: ItemRef) -> bool:
        """Whether a catalog item is in the profile."""
        if ref.type == "rule":
            return self.rules is None or ref.name in self.rules
        if ref.type == "reference":
            return self.references is None or ref.name in self.references
        return ref.server is not None and self.allows_tool(ref.server, ref.name)

    def refused(self, refs: Iterable[ItemRef]) -> set[ItemRef]:
        """The items of ``refs`` outside the profile."""
        return {r for r in refs if not self.allows(r)}


Profiles = Mapping[str, Profile]
"""The configured profiles by name."""


def build_profiles(configs: Mapping[str, ProfileConfig]) -> dict[str, Profile]:
    """Every ``[profiles.NAME]`` table as a :class:`Profile`."""
    return {name: Profile.from_config(name, c) for name, c in configs.items()}


def unknown_items(profiles: Profiles, refs: Iterable[ItemRef]) -> ConfigError | None:
    """The error naming every rule or reference a profile lists that the catalog does not
    hold (None: all are known)."""
    known = {(r.type, r.name) for r in refs}
    problems = []
    for profile in profiles.values():
        for kind, names in (("rule", profile.rules), ("reference", profile.references)):
            missing = sorted(n for n in names or () if (kind, n) not in known)
            if missing:
                problems.append(
                    f"profiles.{profile.name}.{kind}s names unknown {kind}s: "
                    + ", ".join(repr(n) for n in missing)
                )
    if not problems:
        return None
    return ConfigError("; ".join(problems) + "; list only items the catalog holds")


def _names_server(entry: str, server: str) -> bool:
    """Whether a ``tools`` entry (``server/tool`` or ``server__tool``) is one of ``server``'s."""
    return entry.startswith((f"{server}/", f"{server}__"))


def _tool_server(entry: str) -> str:
    """The server part of a ``tools`` entry (``server/tool`` or ``server__tool``)."""
    if "/" in entry:
        return entry.partition("/")[0]
    return entry.partition("__")[0] if "__" in entry else ""


def unknown_servers(configs: Mapping[str, ProfileConfig], servers: Iterable[str]) -> str | None:
    """What is wrong with the servers the profiles name, given the configured ``servers``
    (None: every one is known)."""
    known = set(servers)
    problems = []
    for name, config in configs.items():
        missing = sorted(set(config.servers or ()) - known)
        if missing:
            problems.append(
                f"profiles.{name}.servers names unknown servers: "
                + ", ".join(repr(s) for s in missing)
            )
        bad = [t for t in config.tools or () if _tool_server(t) not in known]
        if bad:
            problems.append(
                f"profiles.{name}.tools names tools of no configured server: "
                + ", ".join(repr(t) for t in bad)
                + " (write 'server/tool' or 'server__tool')"
            )
    return "; ".join(problems) or None
