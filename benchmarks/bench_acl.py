"""ACL cost per request: the client's signature and the broker's check (``aclEnable=true``).

Run: ``python -m benchmarks.bench_acl [--seconds 0.5]``. Prints one line per case with ops/s and
the time per operation: signing a SEND_MESSAGE_V2 (Java 4.9.8's fields) with bodies of 128 B,
1 KiB and 64 KiB, and the broker's check of the same request (signature recomputed, permissions
looked up); a PULL_MESSAGE; and a peer on the global white list (no signature work).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_headers import PULL_FIELDS, V2_FIELDS
from finchmq.broker.acl import PlainAccessValidator
from finchmq.protocol import RemotingCommand, RequestCode
from finchmq.protocol.acl import SessionCredentials, sign_request

ACL_FILE = """\
globalWhiteRemoteAddresses: [10.1.1.*]
accounts:
  - accessKey: bench_account
    secretKey: bench_secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [TopicTest=PUB|SUB, Other1=SUB, Other2=SUB, Other3=PUB]
"""
KEYS = SessionCredentials("bench_account", "bench_secret")


def rate(name: str, fn: Callable[[], object], seconds: float) -> None:
    n, began = 0, time.perf_counter()
    deadline = began + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            fn()
        n += 100
    elapsed = time.perf_counter() - began
    print(f"{name:<44} {n / elapsed:>12,.0f} ops/s {elapsed / n * 1e6:>9.2f} us/op")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "plain_acl.yml"
        path.write_text(ACL_FILE)
        acl = PlainAccessValidator(path)
        acl.load()
        for size in (128, 1024, 64 * 1024):
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(V2_FIELDS), b"x" * size)
            signed = sign_request(request, KEYS)
            rate(
                f"sign SEND_MESSAGE_V2, {size} B body", lambda r=request: sign_request(r, KEYS), args.seconds
            )
            rate(
                f"check SEND_MESSAGE_V2, {size} B body",
                lambda s=signed: acl.check("127.0.0.1:5555", s),
                args.seconds,
            )
        pull = sign_request(RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(PULL_FIELDS)), KEYS)
        rate("check PULL_MESSAGE", lambda: acl.check("127.0.0.1:5555", pull), args.seconds)
        rate("check, peer on the global white list", lambda: acl.check("10.1.1.7:5555", pull), args.seconds)


if __name__ == "__main__":
    main()
