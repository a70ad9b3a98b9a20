"""Fails when an installed distribution is not pinned, at that version, by the lock.

Used by the Dockerfile: `pip freeze | python3 check-pins.py requirements.lock [ignore...]`.
"""

import re
import sys


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[norm(name)] = version.strip()
    return out


with open(sys.argv[1]) as lockfile:
    lock = pins(lockfile.read().splitlines())
ignore = {norm(n) for n in sys.argv[2:]}
installed = pins(sys.stdin.read().splitlines())
bad = [f"{n}=={v}" for n, v in sorted(installed.items()) if n not in ignore and lock.get(n) != v]
if bad:
    sys.exit("installed but not pinned by requirements.lock: " + ", ".join(bad))
checked = len(installed) - len(ignore & installed.keys())
print(f"{checked} distributions, all pinned by requirements.lock")
