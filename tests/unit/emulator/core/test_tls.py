"""The local stack's own certificate authority (emulator/core/tls.py): a server certificate for
every name and address the stack answers on, signed by an authority clients can trust, its key
readable by its owner only; and a new connection told TLS from plain HTTP by its first byte."""

import ipaddress
import socket
import stat

import pytest
from cryptography import x509

from emulator.core import tls


def test_the_server_certificate_names_each_name_and_address_and_only_the_authority_signs(
    tmp_path,
):
    issued = tls.issue(tmp_path / "tls", {"localhost", "*.localhost", "127.0.0.1", "::1"})
    authority = x509.load_pem_x509_certificate(issued.authority.read_bytes())
    server = x509.load_pem_x509_certificate(issued.chain.read_bytes())

    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "*.localhost"}
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    }
    server.verify_directly_issued_by(authority)  # raises if another key signed it
    assert authority.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert stat.S_IMODE(issued.key.stat().st_mode) == 0o600
    assert issued.authority.parent == tmp_path / "tls"


@pytest.mark.parametrize(
    ("first_bytes", "secured"),
    [(b"\x16\x03\x01", True), (b"GET / HTTP/1.1\r\n", False), (b"", False)],
)
def test_a_connection_is_tls_when_its_first_byte_opens_a_handshake(first_bytes, secured):
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        if first_bytes:
            client_side.sendall(first_bytes)
        else:
            client_side.shutdown(socket.SHUT_WR)  # a client that connected and left
        assert tls.starts_tls(server_side) is secured
        if first_bytes:  # peeked, not taken: the handshake or the request is read whole after
            assert server_side.recv(64) == first_bytes
