"""An independent DSSE verifier for rfs's attestation (not rfs code).

Usage: python3 dsse_verify.py ENVELOPE [PUBKEY.pub]

Implements the DSSE v1 protocol from its specification
(github.com/secure-systems-lab/dsse/blob/master/protocol.md) with the
`cryptography` package: PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP
LEN(body) SP body, an Ed25519 signature over it. With a public key, some
signature must verify; without one, the envelope must be unsigned. Then
the payload must be an in-toto Statement v1. Prints the statement's
predicate result and subject digests; exits 1 on any failure.
"""

import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_ssh_public_key


def pae(payload_type: bytes, payload: bytes) -> bytes:
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(payload), payload)


def main() -> int:
    env = json.load(open(sys.argv[1], "rb"))
    payload_type = env["payloadType"]
    payload = base64.b64decode(env["payload"], validate=True)
    if payload_type != "application/vnd.in-toto+json":
        print("wrong payload type", payload_type)
        return 1
    if len(sys.argv) > 2:
        key = load_ssh_public_key(open(sys.argv[2], "rb").read())
        ok = False
        for s in env["signatures"]:
            try:
                key.verify(base64.b64decode(s["sig"]), pae(payload_type.encode(), payload))
                ok = True
            except InvalidSignature:
                pass
        if not ok:
            print("no valid signature")
            return 1
        print("signature: valid")
    elif env["signatures"]:
        print("unexpected signatures")
        return 1
    else:
        print("signature: none")
    st = json.loads(payload)
    if st.get("_type") != "https://in-toto.io/Statement/v1":
        print("not an in-toto Statement v1")
        return 1
    print("result:", st["predicate"]["result"])
    for s in st["subject"]:
        print("subject:", s["name"], json.dumps(s["digest"], sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
