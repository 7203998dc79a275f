"""Fail when a conformance run skipped a test for want of devices, for ``tox -e conf-opencl-2dev``.

Usage: ``python tools/no_device_skips.py JUNIT.xml``. That environment exists to run the
cross-device cases (copies and merges between devices, contexts and events on two devices);
were the second device missing (PoCL ignoring ``POCL_DEVICES``, a platform with one device),
they would skip and the run would still pass. This check turns such a skip into a failure.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

NEED_DEVICES = re.compile(r"has \d+ device\(s\), need \d+")


def device_skips(junit_xml: str) -> list[str]:
    """``test id: reason`` of every test the report says was skipped for want of devices."""
    found = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        for skipped in case.iter("skipped"):
            reason = skipped.get("message") or skipped.text or ""
            if NEED_DEVICES.search(reason):
                found.append(f"{case.get('classname')}::{case.get('name')}: {reason.strip()}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = device_skips(argv[1])
    for line in found:
        print(f"skipped for want of devices: {line}", file=sys.stderr)
    if found:
        print(f"{len(found)} test(s) skipped for want of devices", file=sys.stderr)
        return 1
    print("no test skipped for want of devices")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
