"""`kq up --secure`: a closed bus for the local stack.

A throwaway CA and a server certificate for 127.0.0.1 (the `cryptography` library), one NKey
user per service with the subject permissions of kq.bus_users, and the nats-server config that
requires both. Everything is written under <stack dir>/secure/ (keys readable by the owner
only) and lives as long as the stack: a new `kq up --secure` makes new ones.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

import nkeys  # type: ignore[import-untyped]  # ships no type information
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kq import bus_users
from kq.config import NatsConfig, NatsTlsConfig

SERVER_NAME = "localhost"
_VALID = dt.timedelta(days=7)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kq local stack"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class LocalCA:
    """A throwaway CA that signs server and client certificates (kq up --secure, and tests of the
    deploy/ NATS configuration, whose users are the client certificates' subjects)."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (self._builder(_name("kq local CA"), self.key)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def _builder(self, subject: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        issuer = self.cert.subject if hasattr(self, "cert") else subject
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(self.now - dt.timedelta(minutes=5)).not_valid_after(self.now + _VALID))

    def write_ca(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def issue(self, out: Path, name: str, *, server_host: str | None = None) -> tuple[Path, Path]:
        """(<name>.pem, <name>-key.pem): a server certificate for server_host, else a client one whose
        subject is just CN=<name> (what NATS `verify_and_map` takes as the user)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name) if server_host is not None else x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        b = self._builder(subject, key)
        if server_host is not None:
            names: list[x509.GeneralName] = [x509.DNSName(SERVER_NAME)]
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(server_host)))
            except ValueError:
                names.append(x509.DNSName(server_host))
            b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
        # A server's certificate is also its client one towards its cluster peers (routes are mutual TLS).
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server_host is not None \
            else [ExtendedKeyUsageOID.CLIENT_AUTH]
        cert = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(self.key, hashes.SHA256())
        paths = (out / f"{name}.pem", out / f"{name}-key.pem")
        paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_private(paths[1], _key_pem(key))
        return paths


def make_certificates(out: Path, host: str) -> tuple[Path, Path, Path]:
    """(ca.pem, server.pem, server-key.pem): a CA that signs one server certificate for `host`."""
    ca = LocalCA()
    cert, key = ca.issue(out, "server", server_host=host)
    return ca.write_ca(out / "ca.pem"), cert, key


def make_user(users_dir: Path, user: str) -> str:
    """A fresh NKey user: writes <user>.nk (its seed), returns its public key."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    _write_private(users_dir / f"{user}.nk", seed)
    return nkeys.from_seed(bytearray(seed)).public_key.decode()


class SecureBus:
    """The files of one closed bus, and the settings that use them."""

    def __init__(self, stack_dir: Path, host: str = "127.0.0.1") -> None:
        self.dir = stack_dir / "secure"
        self.users_dir = self.dir / "users"
        self.host = host

    def create(self, *, cluster: bool = False) -> SecureBus:
        """cluster: the servers form a cluster, whose routes are TLS too, each side verifying the other
        against the CA (the route addresses and names come from the command line)."""
        self.users_dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.ca, cert, key = make_certificates(self.dir, self.host)
        public = {u: make_user(self.users_dir, u) for u in bus_users.users()}
        tls = f'tls {{\n  cert_file: "{cert}"\n  key_file: "{key}"\n  timeout: 5\n}}\n'
        self.server_config = self.dir / "nats-server.conf"
        routes = (f'cluster {{\n  tls {{\n    cert_file: "{cert}"\n    key_file: "{key}"\n    ca_file: "{self.ca}"\n'
                  f'    verify: true\n    timeout: 5\n  }}\n}}\n') if cluster else ""
        self.server_config.write_text(tls + routes + bus_users.server_authorization(public))
        return self

    def server_args(self) -> tuple[str, ...]:
        return ("-c", str(self.server_config))

    def nats_config(self, url: str) -> NatsConfig:
        """What every process of the stack reads: TLS, and the user named after its service."""
        return NatsConfig(url=url.replace("nats://", "tls://"), tls=NatsTlsConfig(ca_file=str(self.ca)),
                          nkey_seed_file=str(self.users_dir / "{service}.nk"), ensure_streams=False)
