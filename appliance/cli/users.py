"""`appliance users …`: accounts and API keys."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from appliance.cli.common import ConfigOpt, console, err_console, list_by_default, load_cli_settings

users_app = typer.Typer(no_args_is_help=False, help="Accounts and API keys.")
key_app = typer.Typer(no_args_is_help=True, help="API keys of a user.")
users_app.add_typer(key_app, name="key")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(users_app, name="users")


def _users(config):
    from appliance.server.auth import UserStore

    return UserStore(load_cli_settings(config).data_path / "users.db")


def _read_password(stdin: bool, confirm: bool = True) -> str:
    if stdin:
        return sys.stdin.readline().rstrip("\n")
    return typer.prompt("Password", hide_input=True, confirmation_prompt=confirm)


@users_app.command("list")
def users_list(config: ConfigOpt = None) -> None:
    """Users, roles and active key counts."""
    for user, keys in _users(config).list():
        console.print(f"{user.name}\t{user.role}\t{keys} active key(s)")


@users_app.command("add")
def users_add(name: str, admin: Annotated[bool, typer.Option("--admin", help="Make an administrator.")] = False,
              password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
              config: ConfigOpt = None) -> None:
    """Create an account (prompts for the password, or reads one line from stdin)."""
    user = _users(config).add(name, _read_password(password_stdin), admin)
    err_console.print(f"added {user.name} ({user.role})")


@users_app.command("remove")
def users_remove(name: str, config: ConfigOpt = None) -> None:
    """Delete an account and revoke its keys."""
    _users(config).remove(name)
    err_console.print(f"removed {name}")


@users_app.command("passwd")
def users_passwd(name: str, password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
                 config: ConfigOpt = None) -> None:
    """Set a new password."""
    _users(config).set_password(name, _read_password(password_stdin))
    err_console.print(f"password of {name} changed")


@key_app.command("create")
def key_create(name: str, config: ConfigOpt = None) -> None:
    """Print a new API key for NAME on stdout (the only time it is shown)."""
    print(_users(config).create_key(name))


@key_app.command("revoke")
def key_revoke(key: Annotated[str, typer.Argument(help="The key, its id, or a user name (all their keys).")],
               config: ConfigOpt = None) -> None:
    """Revoke API keys."""
    n = _users(config).revoke_key(key)
    err_console.print(f"revoked {n} key(s)")
    if not n:
        raise typer.Exit(1)


list_by_default(users_app, users_list)
