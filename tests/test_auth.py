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
