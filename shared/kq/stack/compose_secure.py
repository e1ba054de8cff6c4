"""`python -m kq.stack.compose_secure --dir DIR`: the closed bus of compose.yaml, made on the spot.

compose.yaml runs it once as its `secure-init` service before anything else starts; nothing
secret is committed. It writes, under DIR, one directory per container, each mounted into that
container alone (a named volume each):

- nats/: the CA, the server certificate for the host name `nats`, and the server's config
  (TLS required, one NKey user per service with the subject permissions of kq.bus_users);
- <service>/ for each kq service, and setup/ for the stream setup step (the bus's admin user):
  the CA and that one user's NKey seed, <user>.nk, as kq.config's `nats.nkeySeedFile` names it.

Run again, it keeps what is there (the containers restart with the same keys) unless --force.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kq import bus_users
from kq.stack.secure import LocalCA, make_user

SERVICES = ("watcher", "admission", "tas", "podsready", "dispatcher", "gc")
SETUP = "setup"  # the directory of the stream setup step
SETUP_USER = "kq-setup"  # kq.runtime.setup_streams connects under this name
SERVER_DIR = "nats"
SERVER_MOUNT = "/etc/nats/secure"  # where compose mounts nats/ in the NATS container
CONFIG = "nats-server.conf"


def _user_of(directory: str) -> tuple[str, str]:
    """(the bus user whose permissions it gets, the name its seed file takes)."""
    return (bus_users.ADMIN, SETUP_USER) if directory == SETUP else (directory, directory)


def complete(out: Path) -> bool:
    return (out / SERVER_DIR / CONFIG).is_file() and all(
        (out / d / f"{_user_of(d)[1]}.nk").is_file() for d in (*SERVICES, SETUP))


def write(out: Path, *, host: str = "nats", server_mount: str = SERVER_MOUNT, owner: int | None = None) -> None:
    ca = LocalCA()
    server = out / SERVER_DIR
    server.mkdir(parents=True, exist_ok=True)
    ca.write_ca(server / "ca.pem")
    ca.issue(server, "server", server_host=host)
    public: dict[str, str] = {}
    for d in (*SERVICES, SETUP):
        user, seed_name = _user_of(d)
        (out / d).mkdir(parents=True, exist_ok=True)
        ca.write_ca(out / d / "ca.pem")
        public[user] = make_user(out / d, seed_name)
    tls = (f'tls {{\n  cert_file: "{server_mount}/server.pem"\n  key_file: "{server_mount}/server-key.pem"\n'
           "  timeout: 5\n}\n")
    (server / CONFIG).write_text(tls + bus_users.server_authorization(public))
    if owner is not None:  # the kq containers run as a non-root user; the init step may not
        for d in (*SERVICES, SETUP):
            for p in (out / d, *(out / d).iterdir()):
                os.chown(p, owner, owner)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kq.stack.compose_secure", description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True, help="where to write (compose mounts one volume per container under it)")
    p.add_argument("--host", default="nats", help="the NATS server's host name, in its certificate")
    p.add_argument("--server-mount", default=SERVER_MOUNT, help="where the NATS container sees nats/")
    p.add_argument("--owner", type=int, default=None, help="uid (and gid) to own the services' files")
    p.add_argument("--force", action="store_true", help="make new keys even if a set exists")
    args = p.parse_args(argv)
    out = Path(args.dir)
    if complete(out) and not args.force:
        print(f"kq secure: keys already in {out}; kept", flush=True)
        return 0
    write(out, host=args.host, server_mount=args.server_mount, owner=args.owner)
    print(f"kq secure: CA, server certificate and {len(SERVICES) + 1} NKey users written to {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
