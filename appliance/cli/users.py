"""`appliance users …`: accounts and API keys."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from appliance.cli.common import ConfigOpt, console, err_console, list_by_default, load_cli_settings

users_app = typer.Typer(no_args_is_help=False, help="Accounts and API keys.")
key_app = typer.Typer(no_args_is_help=True, help="API keys of a user.")
users_app.add_typer(key_app, name="key")
group_app = typer.Typer(no_args_is_help=False, help="Groups of users (what they may read: `appliance collections`).")
users_app.add_typer(group_app, name="group")


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


def _access(config):
    from appliance.server.access import AccessStore

    settings = load_cli_settings(config)
    # Membership does not need the index; the collection list is only consulted by grants.
    return AccessStore(settings.data_path / "users.db", dict)


@users_app.command("list")
def users_list(config: ConfigOpt = None) -> None:
    """Users, roles, groups and active key counts."""
    access = _access(config)
    for user, keys in _users(config).list():
        groups = ", ".join(access.groups_of(user.name)) or "no group"
        console.print(f"{user.name}\t{user.role}\t{groups}\t{keys} active key(s)")


@group_app.command("add")
def group_add(group: str, user: str, config: ConfigOpt = None) -> None:
    """Put USER in GROUP (created on first use)."""
    _access(config).add_member(group, user)
    err_console.print(f"{user} is now in group {group}")


@group_app.command("remove")
def group_remove(group: str, user: str, config: ConfigOpt = None) -> None:
    """Take USER out of GROUP; their open sessions lose its collections on the next request."""
    _access(config).remove_member(group, user)
    err_console.print(f"{user} is no longer in group {group}")


@group_app.command("list")
def group_list(config: ConfigOpt = None) -> None:
    """Groups with their members and grants."""
    for group, members, grants in _access(config).groups():
        given = ", ".join(f"{c} ({lvl})" for c, lvl in grants) or "no collection"
        console.print(f"{group}\tmembers: {', '.join(members) or '-'}\tmay read: {given}")


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
list_by_default(group_app, group_list)
