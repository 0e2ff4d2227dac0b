import socket
import subprocess
import sys

import pytest

from appliance.offline import OfflineViolation, install_guard, is_allowed


def test_public_ip_refused():
    install_guard(offline=True)
    with socket.socket() as s, pytest.raises(OfflineViolation) as e:
        s.connect(("1.1.1.1", 443))
    assert "1.1.1.1" in str(e.value) and "Attempted from" in str(e.value)


def test_refusal_names_private_addresses_too():
    install_guard(offline=True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, pytest.raises(OfflineViolation):
        s.sendto(b"x", ("10.1.2.3", 53))


def test_loopback_works():
    install_guard(offline=True)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            conn, _ = server.accept()
            conn.close()


def test_allow_list_and_switch_off():
    install_guard(offline=True, allow_hosts=["192.0.2.7"])
    assert is_allowed("192.0.2.7") and not is_allowed("192.0.2.8")
    assert is_allowed("::1") and is_allowed("localhost") and not is_allowed("example.com")
    install_guard(offline=True)


def test_env_switches_set():
    import os

    install_guard(offline=True)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert os.environ["ANONYMIZED_TELEMETRY"] == "False"


def test_guard_in_fresh_process():
    code = ("import socket\nfrom appliance.offline import install_guard, OfflineViolation\n"
            "install_guard()\ns=socket.socket()\n"
            "try:\n    s.connect(('8.8.8.8', 53))\nexcept OfflineViolation as e:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "refused", out.stderr


def test_name_lookups_of_other_hosts_are_refused():
    """A DNS query leaves the machine by itself: refused before any packet is sent."""
    install_guard(offline=True)
    with pytest.raises(OfflineViolation, match="name lookup"):
        socket.getaddrinfo("updates.example.com", 443)
    with pytest.raises(OfflineViolation):
        socket.gethostbyname("telemetry.example.org")
    with pytest.raises(OfflineViolation):
        socket.gethostbyname_ex("cdn.example.net")
    assert socket.getaddrinfo("localhost", 80)  # loopback names and numeric addresses resolve
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_sendmsg_to_another_host_is_refused():
    install_guard(offline=True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, pytest.raises(OfflineViolation):
        s.sendmsg([b"x"], [], 0, ("203.0.113.9", 53))


def test_allow_listed_names_are_resolved_once_and_admitted():
    from appliance.offline import resolve_allowed

    table = {"models.intranet": {"10.20.0.5", "fd00::5"}}

    def fake_resolve(host):
        if host not in table:
            raise socket.gaierror("no such host")
        return table[host]

    allowed = resolve_allowed(["Models.Intranet", "192.0.2.1", "gone.intranet", ""], fake_resolve)
    assert allowed == {"models.intranet", "10.20.0.5", "fd00::5", "192.0.2.1", "gone.intranet"}
