"""TLS for the local stack (`up --tls`): a certificate authority of its own and a server
certificate it signs, for every name and address the stack answers on.

Clients trust the authority by its PEM file (``AWS_CA_BUNDLE``: boto3, the AWS CLI and the SAM
CLI read it), so a call over TLS is verified as on AWS and ``aws:SecureTransport`` is true only
for a request that came over TLS. Keys are ECDSA P-256 (the cheapest handshake); both
certificates are made at each start and valid for a week, in a directory of the port's own (two
stacks on two ports never share one).
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = datetime.timedelta(days=7)
# The first byte of a TLS connection (a handshake record); a plain HTTP request starts with a
# method's letter.
HANDSHAKE_RECORD = 0x16


class Certificates(NamedTuple):
    authority: Path  # the CA's certificate: what clients trust (AWS_CA_BUNDLE)
    chain: Path  # the server's certificate
    key: Path  # the server's private key

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.chain, self.key)
        return context


def issue(directory: Path, names: set[str]) -> Certificates:
    """A new authority and a server certificate for ``names`` (host names, ``*.`` wildcards and
    IP addresses), written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "emulator local CA")])
    ca = (
        _valid(x509.CertificateBuilder(), now)
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    # Python's default context verifies strictly (VERIFY_X509_STRICT): key identifiers required
    authority_key = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    server = (
        _valid(x509.CertificateBuilder(), now)
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_alternative_names(names)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), False)
        .add_extension(authority_key, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    certificates = Certificates(
        directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    )
    certificates.authority.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certificates.chain.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    certificates.key.touch(mode=0o600)
    certificates.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certificates


def starts_tls(connection: socket.socket) -> bool:
    """Whether a new connection's client opened with a TLS handshake (its first byte, peeked)."""
    first = connection.recv(1, socket.MSG_PEEK)
    return bool(first) and first[0] == HANDSHAKE_RECORD


def _valid(builder: x509.CertificateBuilder, now: datetime.datetime) -> x509.CertificateBuilder:
    return (
        builder.serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a client's clock a little behind
        .not_valid_after(now + VALID_FOR)
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _alternative_names(names: set[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in sorted(names):
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result
