"""A throwaway certificate authority, made with Debian's `openssl`: for the
TLS tests and benchmarks (bench_tls.py), never for a real deployment.

Pki(directory) creates a CA (EC P-256 keys: fast to make and to handshake
with) and issue(name) signs a leaf certificate usable by a server and a
client (SAN IP:127.0.0.1 and localhost). Nothing is committed: every key is
made fresh in the caller's temporary directory.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
LEAF_EXTENSIONS = """\
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
"""


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path


def openssl_path() -> str:
    path = shutil.which("openssl")
    assert path, "openssl is required (Debian package openssl; `make test` installs it)"
    return path


class Pki:
    def __init__(self, directory: Path, name: str = "disque-test-ca") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = self.dir / f"{name}.crt"
        self.ca_key = self.dir / f"{name}.key"
        self._run("req", "-x509", "-new", *EC_KEY, "-keyout", self.ca_key, "-out", self.ca,
                  "-days", "2", "-subj", f"/CN={name}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._extensions = self.dir / "leaf.ext"
        self._extensions.write_text(LEAF_EXTENSIONS)

    def issue(self, name: str) -> Leaf:
        """A certificate and key for CN=name, signed by this CA."""
        cert, key, request = (self.dir / f"{name}.{ext}" for ext in ("crt", "key", "csr"))
        self._run("req", "-new", *EC_KEY, "-keyout", key, "-out", request,
                  "-subj", f"/CN={name}")
        self._run("x509", "-req", "-in", request, "-CA", self.ca, "-CAkey", self.ca_key,
                  "-set_serial", "0x" + secrets.token_hex(8), "-days", "2",
                  "-extfile", self._extensions, "-out", cert)
        return Leaf(cert, key)

    def _run(self, *args) -> None:
        done = subprocess.run([openssl_path(), *map(str, args)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"openssl {args[0]} failed:\n{done.stderr}"
