"""What `netpeer dev up` tells the user to paste: the same stack again."""

from __future__ import annotations

import shlex
from pathlib import Path

from netpeer_dev.stack import DEFAULT_STATE_DIR, load_hint


def command_of(hint: str) -> list[str]:
    prefix = 'load the settings with: eval "$('
    assert hint.startswith(prefix) and hint.endswith(')"'), hint
    return shlex.split(hint[len(prefix):-2])


def test_the_hint_repeats_the_flags_and_a_state_directory_that_is_not_the_default():
    assert command_of(load_hint(Path(DEFAULT_STATE_DIR))) == ["netpeer", "dev", "up"]
    assert command_of(load_hint(Path(DEFAULT_STATE_DIR), "--ha", "--replicas", "3")) == [
        "netpeer", "dev", "up", "--ha", "--replicas", "3"]
    assert command_of(load_hint(Path("/tmp/my stacks/dev"), "--sites", "east,west", "--replicas", "2")) == [
        "netpeer", "dev", "up", "--sites", "east,west", "--replicas", "2", "--state-dir", "/tmp/my stacks/dev"]
