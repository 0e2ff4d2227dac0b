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
