"""Password hashing, login throttling, API keys and revocation (pure, on a temp SQLite)."""

import pytest

from appliance.server import auth
from appliance.server.auth import AuthError, UserStore, hash_password, verify_password


def test_scrypt_hash_roundtrip_and_salt():
    h1, h2 = hash_password("correct horse"), hash_password("correct horse")
    assert h1 != h2 and h1.startswith("scrypt$")
    assert verify_password("correct horse", h1) and not verify_password("wrong horse", h1)
    assert not verify_password("x", "garbage")


def test_users_and_roles(tmp_path):
    users = UserStore(tmp_path / "u.db")
    users.add("alice", "password1", admin=True)
    users.add("bob", "password2")
    assert users.login("alice", "password1").is_admin and not users.login("bob", "password2").is_admin
    with pytest.raises(AuthError, match="already exists"):
        users.add("bob", "password3")
    with pytest.raises(AuthError, match="at least 8"):
        users.add("carol", "short")
    users.set_password("bob", "newpassword")
    assert users.login("bob", "newpassword").name == "bob"


def test_throttling_locks_after_failures(tmp_path, monkeypatch):
    users = UserStore(tmp_path / "u.db")
    users.add("alice", "password1")
    for _ in range(auth.MAX_FAILURES):
        with pytest.raises(AuthError, match="wrong"):
            users.login("alice", "nope")
    with pytest.raises(AuthError, match="too many failed logins"):
        users.login("alice", "password1")  # even the right password, while locked
    monkeypatch.setattr(auth, "LOCK_SECONDS", 0.0)
    assert users.login("alice", "password1").name == "alice"


def test_api_keys_hashed_and_revocable(tmp_path):
    users = UserStore(tmp_path / "u.db")
    users.add("alice", "password1")
    key = users.create_key("alice")
    raw = (tmp_path / "u.db").read_bytes()
    assert key.encode() not in raw  # only the hash is stored
    assert users.user_for_key(key).name == "alice"
    assert users.revoke_key(key) == 1
    assert users.user_for_key(key) is None
    k2 = users.create_key("alice")
    users.remove("alice")
    assert users.user_for_key(k2) is None
    with pytest.raises(AuthError, match=r"no user 'alice' .*`appliance users add alice` creates it"):
        users.create_key("alice")  # a key for nobody: the error says how to add the user


def test_lockout_is_per_address_so_others_can_still_log_in(tmp_path):
    users = UserStore(tmp_path / "u.db")
    users.add("admin", "password1", admin=True)
    for _ in range(auth.MAX_FAILURES):
        with pytest.raises(AuthError, match="wrong"):
            users.login("admin", "guess", address="198.51.100.7")
    with pytest.raises(AuthError, match="too many failed logins"):
        users.login("admin", "password1", address="198.51.100.7")
    assert users.login("admin", "password1", address="10.0.0.5").is_admin  # the real admin, elsewhere


def test_lock_escalates_and_is_capped():
    now = [1000.0]
    throttle = auth.LoginThrottle(clock=lambda: now[0])
    key = ("198.51.100.7", "admin")
    for _ in range(auth.MAX_FAILURES):
        throttle.failed(key)
    assert throttle.wait(key) == auth.LOCK_SECONDS
    throttle.failed(key)
    assert throttle.wait(key) == 2 * auth.LOCK_SECONDS
    for _ in range(20):
        throttle.failed(key)
    assert throttle.wait(key) == auth.LOCK_CAP_SECONDS
    now[0] += auth.LOCK_CAP_SECONDS
    assert throttle.wait(key) == 0.0
    throttle.succeeded(key)
    assert len(throttle) == 0


def test_failure_records_are_bounded(monkeypatch):
    monkeypatch.setattr(auth, "MAX_TRACKED", 100)
    throttle = auth.LoginThrottle()
    for i in range(1000):
        throttle.failed((f"10.0.{i // 256}.{i % 256}", "admin"))
    assert len(throttle) == 100


def test_unknown_names_cost_a_hash_like_known_ones(tmp_path, monkeypatch):
    users = UserStore(tmp_path / "u.db")
    users.add("alice", "password1")
    calls = []
    real = auth.verify_password
    monkeypatch.setattr(auth, "verify_password", lambda pw, stored: calls.append(stored) or real(pw, stored))
    for name in ("alice", "nobody"):
        with pytest.raises(AuthError, match="wrong user name or password"):
            users.login(name, "wrong-password", address="")
    assert len(calls) == 2 and all(c.startswith("scrypt$131072$") for c in calls)


def test_new_hashes_use_owasp_cost_and_old_ones_still_verify():
    assert hash_password("x" * 8).startswith("scrypt$131072$8$1$")
    old = "scrypt$16384$8$1$" + "00" * 16 + "$" + __import__("hashlib").scrypt(
        b"legacy-pass", salt=bytes(16), n=2**14, r=8, p=1, dklen=32).hex()
    assert verify_password("legacy-pass", old) and not verify_password("other", old)
